"""rnnt.training.keys_log: a resumed run's keys file is cut back to where its checkpoint recorded it, or, with no
record, to the epochs before the one resumed; a fresh start starts it afresh."""

from rnnt.training.keys_log import KeysLog, remove_other_ranks


def test_the_keys_of_batches_after_the_checkpoint_are_cut_and_the_run_goes_on(tmp_path):
    log = KeysLog(str(tmp_path), 1)
    log.write(0, ["a", "b"])
    recorded = log.offset()
    log.write(0, ["c"])  # trained after the checkpoint, then killed
    log.close()
    again = KeysLog(str(tmp_path), 1)
    again.resume(recorded, 0)
    again.write(0, ["c2"])
    again.close()
    assert (tmp_path / "keys-rank1.txt").read_text() == "0 a\n0 b\n0 c2\n"

    without_record = KeysLog(str(tmp_path), 1)  # a checkpoint of another number of ranks: resumed at epoch 1
    without_record.write(1, ["x"])
    without_record.resume(None, 1)
    without_record.write(1, ["y"])
    without_record.close()
    assert (tmp_path / "keys-rank1.txt").read_text() == "0 a\n0 b\n0 c2\n1 y\n"

    inside = KeysLog(str(tmp_path), 1)  # no record, resumed inside epoch 1: its batches trained are kept
    inside.write(2, ["w"])
    inside.resume(None, 1, batch=1)
    inside.close()
    assert (tmp_path / "keys-rank1.txt").read_text() == "0 a\n0 b\n0 c2\n1 y\n"

    fresh = KeysLog(str(tmp_path), 1)
    fresh.resume(0, 0)
    fresh.write(0, ["z"])
    assert fresh.offset() == 4
    fresh.close()
    assert (tmp_path / "keys-rank1.txt").read_text() == "0 z\n"


def test_a_fresh_start_removes_the_keys_of_ranks_it_does_not_have(tmp_path):
    for name in ("keys-rank0.txt", "keys-rank1.txt", "keys-rank2.txt", "keys-rank10.txt", "keys-rankx.txt"):
        (tmp_path / name).write_text("0 a\n")
    remove_other_ranks(str(tmp_path), 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys-rank0.txt", "keys-rank1.txt", "keys-rankx.txt"]
