"""batches_of_every_rank in one process: a place held (a bucketed slice its filters emptied) is a step of weight
0 that runs the last batch again and records its own position; before any batch, a spare one stands in."""

from rnnt.training.distributed import World, batches_of_every_rank


def batch(position: int, *keys: str) -> dict:
    return {"keys": list(keys), "position": position, "role": 0}


def test_a_place_held_is_a_step_of_weight_0_on_the_last_batch_that_delivers_its_own_position():
    given = [batch(1, "a", "b"), batch(2), batch(3, "c")]
    turns = list(batches_of_every_rank(World(), given, lambda: False))
    assert [(t.batch["position"], t.weight, t.ranks_with_batch, t.delivered["position"]) for t in turns] == \
        [(1, 1.0, 1, 1), (1, 0.0, 0, 2), (3, 1.0, 1, 3)]


def test_a_place_held_first_runs_the_spare_batch_and_an_epoch_of_places_held_alone_ends():
    spare = batch(2, "x")
    turns = list(batches_of_every_rank(World(), [batch(1), spare], lambda: False, lambda: spare))
    assert [(t.batch["keys"], t.weight, t.delivered["position"]) for t in turns] == [(["x"], 0.0, 1), (["x"], 1.0, 2)]
    assert list(batches_of_every_rank(World(), [batch(1), batch(2)], lambda: False)) == []
