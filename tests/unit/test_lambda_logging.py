"""The local runtime's emulation of Lambda's log handling, and the levels it is given."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from functions.core import env_names
from functions.core.log_levels import function_log_level, level_number
from infra.environments import application_log_level
from local.function_environments import lambda_log_environment
from local.lambda_logging import LambdaJsonFormatter, LevelFilteredStream, install, line_level

EMF = json.dumps({"_aws": {"CloudWatchMetrics": []}, "WorkCompleted": [1.0]})


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ('{"level": "DEBUG", "message": "m"}', logging.DEBUG),
        ('{"level": "warn", "message": "m"}', logging.WARNING),
        ('{"level": "WARNING", "message": "m"}', logging.WARNING),
        ('{"level": "FATAL"}', logging.CRITICAL),
        (EMF, logging.INFO),  # no level: INFO
        ('{"level": "LOUD"}', logging.INFO),  # not a level: INFO
        ('{"level": 40}', logging.INFO),
        ("plain text", logging.INFO),
        ("{not json", logging.INFO),
    ],
)
def test_lambdas_filter_reads_a_lines_level_or_takes_it_for_info(line: str, level: int) -> None:
    assert line_level(line) == level


def test_the_filter_keeps_whole_lines_at_or_above_its_threshold() -> None:
    out = io.StringIO()
    stream = LevelFilteredStream(out, logging.WARNING)

    stream.write('{"level": "INFO", "message": "dropped"}\n{"level": "ERROR", "message": "kept')
    stream.write('"}\n')
    stream.write(EMF)  # print() writes the text, then the newline
    stream.write("\n")

    assert out.getvalue() == '{"level": "ERROR", "message": "kept"}\n'


def test_the_filter_at_info_keeps_metric_lines() -> None:
    out = io.StringIO()
    stream = LevelFilteredStream(out, logging.INFO)

    stream.write(EMF + "\n" + '{"level": "DEBUG"}\n')

    assert out.getvalue() == EMF + "\n"


def test_the_filter_never_splices_lines_written_by_two_threads() -> None:
    out = io.StringIO()
    stream = LevelFilteredStream(out, logging.INFO)
    barrier = threading.Barrier(2)

    def write(name: str) -> None:
        barrier.wait()
        for n in range(200):
            stream.write(f'{{"level": "INFO", "from": "{name}", ')
            stream.write(f'"n": {n}}}')
            stream.write("\n")

    threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 400


def test_a_flush_ends_the_unfinished_line() -> None:
    out = io.StringIO()
    stream = LevelFilteredStream(out, logging.INFO)

    stream.write("no newline yet")
    stream.flush()

    assert out.getvalue() == "no newline yet\n"


@pytest.fixture
def clean_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)


def test_install_sets_the_root_logger_up_as_lambdas_runtime_does(
    clean_root: logging.Logger,
) -> None:
    install({env_names.ENV_LAMBDA_LOG_FORMAT: "JSON", env_names.ENV_LAMBDA_LOG_LEVEL: "WARN"})

    assert clean_root.level == logging.WARNING
    added = clean_root.handlers[-1]
    assert isinstance(added.formatter, LambdaJsonFormatter)
    assert isinstance(sys.stdout, LevelFilteredStream) and sys.stdout.threshold == logging.WARNING
    assert isinstance(sys.stderr, LevelFilteredStream)


def test_install_leaves_the_text_format_alone(clean_root: logging.Logger) -> None:
    handlers = list(clean_root.handlers)

    install({env_names.ENV_LAMBDA_LOG_LEVEL: "DEBUG"})

    assert clean_root.handlers == handlers
    assert not isinstance(sys.stdout, LevelFilteredStream)


def test_lambdas_json_line_carries_the_level_and_the_extras() -> None:
    record = logging.LogRecord("lib", logging.WARNING, __file__, 1, "slow %s", ("call",), None)
    record.attempt = 2

    line = json.loads(LambdaJsonFormatter().format(record))

    assert (line["level"], line["message"], line["logger"], line["attempt"]) == (
        "WARNING",
        "slow call",
        "lib",
        2,
    )


@pytest.mark.parametrize(
    ("log_level", "lambda_level"),
    [("DEBUG", "DEBUG"), ("INFO", "INFO"), ("WARNING", "INFO"), ("ERROR", "INFO")],
)
def test_lambdas_application_log_level_is_never_above_info(
    log_level: str, lambda_level: str
) -> None:
    assert application_log_level(log_level) == lambda_level
    assert lambda_log_environment(log_level) == {
        env_names.ENV_POWERTOOLS_LOG_LEVEL: log_level,
        env_names.ENV_LAMBDA_LOG_FORMAT: "JSON",
        env_names.ENV_LAMBDA_LOG_LEVEL: lambda_level,
    }


@pytest.mark.parametrize("log_level", ["DEBUG", "INFO", "WARNING", "ERROR"])
def test_the_functions_level_is_the_configured_one(log_level: str) -> None:
    assert function_log_level(lambda_log_environment(log_level)) == level_number(log_level)


def test_the_functions_level_is_the_stricter_of_lambdas_and_powertools() -> None:
    assert function_log_level({env_names.ENV_LAMBDA_LOG_LEVEL: "WARN"}) == logging.WARNING
    assert (
        function_log_level(
            {env_names.ENV_LAMBDA_LOG_LEVEL: "ERROR", env_names.ENV_POWERTOOLS_LOG_LEVEL: "DEBUG"}
        )
        == logging.ERROR
    )
    assert function_log_level({env_names.ENV_POWERTOOLS_LOG_LEVEL: "loud"}) is None
    assert function_log_level({}) is None
