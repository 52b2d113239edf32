"""Errors that reach the user as one line: file, line and what is wrong."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad input from the user (exit code 2)."""

    exit_code = 2

    def __init__(self, message: str, file: str | Path | None = None, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line

    def one_line(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return f"{where}{self.message}".replace("\n", " ")


class RunFailed(Exception):
    """A probe or trace run failed (exit code 3); evidence gathered so far is kept."""

    exit_code = 3
