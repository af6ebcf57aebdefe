"""A small file store: flat folders of short text files; copying held back."""

from __future__ import annotations

import random
from typing import Any

from toolrl_lib.envs.base import Environment, ToolError, Turn, call, calls, reply, string, tool

FOLDERS = ["docs", "inbox", "notes", "archive"]
STEMS = ["report", "invoice", "plan", "recipe", "minutes", "budget", "draft", "photo_list"]
NOTES = ["call the plumber at 5", "buy oat milk", "renew the passport", "book the train to Lyon",
         "water the plants", "send the slides to Ana", "pay the parking fine"]


class FileStoreApp:
    """State: ``{"files": {"folder/name.txt": content}}``."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def _check(self, path: str, exists: bool) -> None:
        folder, _, name = path.partition("/")
        if folder not in FOLDERS or not name or "/" in name:
            raise ToolError(f"bad path {path!r}: use <folder>/<name> with a folder of {FOLDERS}")
        if exists and path not in self.state["files"]:
            raise ToolError(f"no file {path}")
        if not exists and path in self.state["files"]:
            raise ToolError(f"{path} already exists")

    def list_files(self, folder: str) -> list[str]:
        return sorted(p for p in self.state["files"] if p.startswith(folder + "/"))

    def read_file(self, path: str) -> dict[str, Any]:
        self._check(path, exists=True)
        return {"path": path, "content": self.state["files"][path]}

    def write_file(self, path: str, content: str) -> dict[str, Any]:
        self._check(path, exists=False)
        if len(self.state["files"]) >= 100:
            raise ToolError("the store is full")
        self.state["files"][path] = content
        return {"written": path}

    def move_file(self, source: str, destination: str) -> dict[str, Any]:
        self._check(source, exists=True)
        self._check(destination, exists=False)
        self.state["files"][destination] = self.state["files"].pop(source)
        return {"moved": source, "to": destination}

    def delete_file(self, path: str) -> dict[str, Any]:
        self._check(path, exists=True)
        del self.state["files"][path]
        return {"deleted": path}

    def copy_file(self, source: str, destination: str) -> dict[str, Any]:
        self._check(source, exists=True)
        self._check(destination, exists=False)
        self.state["files"][destination] = self.state["files"][source]
        return {"copied": source, "to": destination}


_PATH = string("path, <folder>/<name>")


class FileStore(Environment):
    name = "files"
    purpose = f"You manage the user's files (folders: {', '.join(FOLDERS)})."
    app = FileStoreApp
    tools = [
        tool("list_files", "Paths in a folder.", {"folder": string("folder", FOLDERS)}),
        tool("read_file", "Content of a file.", {"path": _PATH}),
        tool("write_file", "Create a file.", {"path": _PATH, "content": string("text")}),
        tool("move_file", "Move or rename a file.", {"source": _PATH, "destination": _PATH}),
        tool("delete_file", "Delete a file.", {"path": _PATH}),
        tool("copy_file", "Copy a file.", {"source": _PATH, "destination": _PATH}),
    ]

    def make_task(self, rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
        stems = rng.sample(STEMS, 5)
        files = {f"{rng.choice(FOLDERS[:3])}/{stem}_{rng.randrange(1, 10)}.txt": rng.choice(NOTES)
                 for stem in stems}
        state = {"files": files}
        path = rng.choice(sorted(files))
        folder, name = path.split("/")
        stem = name.rsplit("_", 1)[0]
        fresh = f"notes/{rng.choice([s for s in STEMS if s not in stems])}.txt"
        hidden: list[str] = ["copy_file"]
        if kind == "dependent":
            turns = [Turn(f"Move the file in {folder} whose name starts with '{stem}' to archive.",
                          [calls(call("list_files", folder=folder)),
                           calls(call("move_file", source=path, destination=f"archive/{name}")),
                           reply("Moved.")])]
        elif kind == "facts":
            turns = [Turn(f"What does {path} say?",
                          [calls(call("read_file", path=path)), reply(f"It says: {files[path]}.")],
                          facts=[files[path]])]
        elif kind == "missing_param":
            text = rng.choice(NOTES)
            turns = [Turn(f"Create the file {fresh}.", [reply("What should it contain?")]),
                     Turn(f"Write: {text}", [calls(call("write_file", path=fresh, content=text)),
                                             reply("Created.")])]
        elif kind == "missing_function":
            target = f"archive/{name}"
            turns = [Turn(f"Copy {path} to {target}.", [reply("I have no function to copy files.")]),
                     Turn("I added a function for that. Please copy it now.",
                          [calls(call("copy_file", source=path, destination=target)), reply("Copied.")],
                          reveal=["copy_file"])]
            return state, turns, hidden
        else:  # multi_request
            second = rng.choice([p for p in sorted(files) if p != path])
            turns = [Turn(f"Delete {path}.", [calls(call("delete_file", path=path)), reply("Deleted.")]),
                     Turn(f"And tell me what {second} says.",
                          [calls(call("read_file", path=second)), reply(f"It says: {files[second]}.")],
                          facts=[files[second]])]
        return state, turns, hidden
