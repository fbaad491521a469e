"""enqueue's answer is an int to every caller that knew it as one (worker/jobs/uniqueness.py)."""

import json
import pickle

from jobwarden import Enqueued


def test_an_enqueued_id_reads_as_the_int_it_is():
    job_id = Enqueued(42, folded=True)
    assert job_id == 42 and hash(job_id) == hash(42) and isinstance(job_id, int)
    assert str(job_id) == f"{job_id}" == "%d" % job_id == "%s" % job_id == "42"  # noqa: UP031
    assert f"/jobs/{job_id}" == "/jobs/42" and f"{job_id:>5}" == "   42"
    assert json.dumps({"id": job_id}) == '{"id": 42}'
    assert job_id + 1 == 43 and int(job_id) == 42
    assert pickle.loads(pickle.dumps(int(job_id))) == 42
    assert repr(job_id) == "Enqueued(42, folded=True, replaced=False)"


def test_a_fresh_id_was_not_folded():
    assert not Enqueued(7).folded and not Enqueued(7).replaced
