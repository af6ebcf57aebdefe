"""Hard file-store tasks: files pointing at other files, and plain notes (see ``hard``)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from toolrl_lib.envs.base import Turn, call, calls, failing, reply
from toolrl_lib.envs.files import FOLDERS, NOTES, STEMS


def store(rng: random.Random) -> tuple[dict[str, str], list[str]]:
    """Six files with distinct stems and distinct notes; their paths in a random order."""
    paths = [f"{rng.choice(FOLDERS[:3])}/{stem}_{rng.randrange(1, 10)}.txt" for stem in rng.sample(STEMS, 6)]
    return dict(zip(paths, rng.sample(NOTES, 6), strict=True)), paths


def hard_task(rng: random.Random, kind: str) -> tuple[dict[str, Any], list[Turn], list[str]]:
    files, paths = store(rng)
    state = {"files": files}
    hidden = ["copy_file"]
    fresh_stem = rng.choice([s for s in STEMS if not any(f"/{s}_" in p for p in paths)] or ["todo"])
    if kind == "chain":
        hops = rng.randint(1, 4)  # files that only point on: hops + 2 calls in all
        trail = paths[: hops + 1]
        for here, there in zip(trail, trail[1:], strict=False):
            files[here] = f"continued in {there}"
        fresh = f"notes/{fresh_stem}.txt"
        steps = [calls(call("read_file", path=p)) for p in trail]
        steps += [calls(call("write_file", path=fresh, content=files[trail[-1]])), reply("Saved.")]
        return state, [Turn(f"Read {trail[0]} and follow where it points until you reach a note; save that "
                            f"note, word for word, as {fresh}.", steps)], hidden
    if kind == "report":
        asked = paths[: rng.choice([2, 3])]
        said = "; ".join(f"{p} says {files[p]}" for p in asked)
        return state, [Turn(f"What do {' and '.join(asked)} say?",
                            [calls(call("read_file", path=p)) for p in asked] + [reply(said + ".")],
                            facts=[files[p] for p in asked])], hidden
    text = rng.choice(NOTES)
    if kind == "recover":
        if rng.random() < 0.5:  # a folder that does not exist: the error lists the real ones
            wrong, right = f"documents/{fresh_stem}.txt", f"docs/{fresh_stem}.txt"
            ask = f"Save '{text}' as {wrong}."
        else:  # the name is taken: the user said what to do then
            wrong = paths[0]
            right = wrong.replace(".txt", "_new.txt")
            ask = f"Save '{text}' as {wrong}; if that name is taken, add _new before .txt."
        return state, [Turn(ask, [failing(call("write_file", path=wrong, content=text)),
                                  calls(call("write_file", path=right, content=text)),
                                  reply(f"Saved as {right}.")])], hidden
    path = paths[0]
    folder, name = path.split("/")
    if kind == "ask_user":
        return state, [Turn("Move one of my files to archive and tell me what it says.", [reply("Which file?")]),
                       Turn(f"The {name.rsplit('_', 1)[0]} one in {folder}.",
                            [calls(call("list_files", folder=folder)),
                             calls(call("move_file", source=path, destination=f"archive/{name}")),
                             calls(call("read_file", path=f"archive/{name}")),
                             reply(f"Moved. It says: {files[path]}.")], facts=[files[path]])], hidden
    if kind == "confirm":
        while len({p.split("/")[0] for p in files}) < 2:  # so the smallest folder holds <= 3 files
            files, paths = store(rng)
            state = {"files": files}
        counts = Counter(p.split("/")[0] for p in files)
        folder = min(counts, key=lambda f: (counts[f], f))
        doomed = sorted(p for p in files if p.startswith(folder + "/"))
        return state, [Turn(f"Delete every file in {folder}, but show me the list and wait for my yes first.",
                            [calls(call("list_files", folder=folder)),
                             reply(f"These would go: {', '.join(doomed)}. Delete them?")], facts=doomed),
                       Turn("Yes, delete them.", [*(calls(call("delete_file", path=p)) for p in doomed),
                                                  reply("Deleted.")])], hidden
    raise ValueError(f"files: no hard task kind {kind!r}")
