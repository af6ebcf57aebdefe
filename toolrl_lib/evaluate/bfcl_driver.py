"""Run BFCL's official evaluator on result files we wrote. Executed INSIDE the scorer venv.

Usage (by ``toolrl_lib.evaluate.scorer``; stdlib + bfcl_eval only, never toolrl_lib):

    <bfcl-venv>/bin/python bfcl_driver.py --root DIR --model NAME[,NAME...] --categories a,b

``DIR/result/NAME/<group>/BFCL_v4_<cat>_result.json`` must exist. Each model name is
registered at run time in ``MODEL_CONFIG_MAPPING`` with ``QwenFCHandler`` (function-calling
mode, ``<tool_call>\\n{json}\\n</tool_call>`` results); the installed package is not edited.
Scores go to ``DIR/score``.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import os
import sys
import types

# BFCL's model table imports every hosted-API handler, and with them the vendors' SDKs (anthropic,
# openai, cohere, google-genai, qwen-agent, ...): ~6 of the ~7 s this process took before scoring
# anything. Scoring never calls a hosted API, so those handler modules are replaced by stand-ins
# whose names are inert classes; the checkers and the local handler we register stay BFCL's own.
API_HANDLERS = "bfcl_eval.model_handler.api_inference."


class _UnusedHandlers(types.ModuleType):
    """A hosted-API handler module never used when scoring: any name in it is an inert class."""

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        stand_in = type(name, (), {"__doc__": f"stand-in for {self.__name__}.{name} (not used when scoring)"})
        setattr(self, name, stand_in)
        return stand_in


class _SkipApiHandlers(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(name, self) if name.startswith(API_HANDLERS) else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _UnusedHandlers(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--categories", required=True)
    args = parser.parse_args(argv)
    models = [name for name in args.model.split(",") if name]
    for name in models:
        if "_" in name or "/" in name:
            parser.error(f"model name {name!r} must not contain '_' or '/'")
    # BFCL reads its project root from the environment at import time.
    os.environ["BFCL_PROJECT_ROOT"] = os.path.abspath(args.root)

    sys.meta_path.insert(0, _SkipApiHandlers())
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING, ModelConfig
    from bfcl_eval.eval_checker import eval_runner
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler

    for name in models:
        MODEL_CONFIG_MAPPING[name] = ModelConfig(
            model_name=name,
            display_name=name,
            url="",
            org="toolrl",
            license="",
            model_handler=QwenFCHandler,
            is_fc_model=True,
        )
    categories = [c for c in args.categories.split(",") if c]
    eval_runner.main(models, categories, None, None, partial_eval=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
