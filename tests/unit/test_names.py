"""Names (job types, queues) and request ids match whole strings: no trailing newline."""

import pytest

from jobwarden.console.web.security import _REQUEST_ID
from jobwarden.worker.jobs.registry import check_name


@pytest.mark.parametrize("name", ["emails", "a.b:c-d_1", "x" * 200])
def test_good_names_pass(name):
    assert check_name("queue", name) == name


@pytest.mark.parametrize("name", ["emails\n", "emails\r\n", "\nemails", "a b", "", "x" * 201,
                                  "emails\x00"])
def test_names_with_a_trailing_newline_or_other_junk_are_refused(name):
    with pytest.raises(ValueError, match="invalid queue name"):
        check_name("queue", name)


def test_a_request_id_with_a_trailing_newline_is_not_trusted():
    assert _REQUEST_ID.match("abc-123")
    assert not _REQUEST_ID.match("abc-123\n")
