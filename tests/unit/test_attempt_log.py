"""An attempt's lines as they are kept (worker/engine/attempt_log.py), without a worker:
redaction before the cut, a line that cannot be formatted, the cap, the close."""

from __future__ import annotations

import json
import logging

from jobwarden.worker.engine.attempt_log import (
    ATTEMPT_LOG_BYTES,
    LINE_CHARS,
    AttemptLog,
    line_text,
)


def record(msg: str, *args: object, exc_info: object = None) -> logging.LogRecord:
    return logging.LogRecord("app", logging.INFO, __file__, 1, msg, args, exc_info)  # type: ignore[arg-type]


def test_a_secret_across_the_cut_is_redacted_before_it_is_cut():
    # A key's shape is only a key whole: cut first, its first 11 characters would stay.
    text = line_text(record("x" * (LINE_CHARS - 11) + " sk_live_4eC39HqLyjWDarjtT1zdp7dc "
                            + "y" * 50))
    assert "sk_live" not in text and text.endswith(" chars cut]")
    assert text.startswith("x" * (LINE_CHARS - 11) + " [REDA")


def test_a_line_whose_arguments_do_not_fit_is_kept_saying_so():
    text = line_text(record("%d orders for %s", "not a number"))
    assert "could not be formatted" in text and "%d orders for %s" in text


def test_a_logged_exception_is_kept_redacted_in_its_line():
    try:
        raise ValueError("token=tok_abcdef123456")
    except ValueError as exc:
        text = line_text(record("failed", exc_info=(ValueError, exc, exc.__traceback__)))
    assert text.startswith("failed\nTraceback") and "tok_abcdef123456" not in text


def test_the_cap_keeps_the_first_lines_and_counts_the_rest():
    log = AttemptLog()
    for i in range(5000):
        log.add(record("line %d", i))
    lines, dropped = log.take()
    assert lines is not None
    kept = json.loads(lines)
    assert [line[3] for line in kept[:2]] == ["line 0", "line 1"]
    assert len(kept) + dropped == 5000 and dropped > 0
    assert len(lines.encode()) <= ATTEMPT_LOG_BYTES


def test_a_line_after_the_take_is_not_kept_nor_counted():
    log = AttemptLog()
    log.add(record("during"))
    lines, dropped = log.take()
    log.add(record("after"))
    assert json.loads(lines or "[]")[0][3] == "during" and dropped == 0
    assert log.take() == (None, 0)


def test_warnings_still_reach_stderr_when_the_application_configured_no_logging(capsys):
    from jobwarden.worker.engine import attempt_log

    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers[:] = []
    try:
        attempt_log.install()
        logging.getLogger("app.unconfigured").warning("told on stderr")
        logging.getLogger("app.unconfigured").info("below lastResort's level")
    finally:
        root.handlers[:] = saved
    err = capsys.readouterr().err
    assert "told on stderr" in err and "below" not in err
