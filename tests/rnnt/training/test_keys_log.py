"""rnnt.training.keys_log: a resumed run's keys file is cut back to where its checkpoint recorded it, or, with no
record, to the epochs before the one resumed; a fresh start starts it afresh."""

from rnnt.training.keys_log import KeysLog


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

    fresh = KeysLog(str(tmp_path), 1)
    fresh.resume(0, 0)
    fresh.write(0, ["z"])
    assert fresh.offset() == 4
    fresh.close()
    assert (tmp_path / "keys-rank1.txt").read_text() == "0 z\n"
