"""An Ollama ``Modelfile`` for an exported GGUF: the family's chat template and stop tokens.

The template is what the model was trained on, not a generic one: the system turn holds the
user's system text and then the tools block that ``toolrl_lib.prompts`` renders for the
family (taken from the adapter itself, so the two cannot drift apart), calls come back as
``<tool_call>`` blocks and tool results go in as ``<tool_response>`` user turns, as in
training. ChatML families only (``hermes`` = SmolLM2, ``qwen3``); Ollama writes a tool's
JSON compactly where our adapter puts a space after ``,`` and ``:``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolrl_lib.prompts import QWEN3_EMPTY_THINK, _dumps, _function_entries, get_adapter

CHATML_FAMILIES = ("hermes", "qwen3")
CHATML_STOPS = ("<|im_end|>", "<|im_start|>")
_SENTINEL = {"name": "toolrl_sentinel", "description": "", "parameters": {}}


def tools_block_parts(family: str) -> tuple[str, str]:
    """The family's tools block split around its tool lines: (text before, text after)."""
    block = get_adapter(family).tools_block([_SENTINEL])
    line = "\n" + _dumps(_function_entries([_SENTINEL])[0])
    if block.count(line) != 1:
        raise ValueError(f"{family}: cannot locate the tool line in the tools block")
    before, after = block.split(line)
    return before, after


def chat_template(family: str, enable_thinking: bool = False) -> str:
    """Ollama (Go text/template) version of the family's prompt format."""
    if family not in CHATML_FAMILIES:
        raise ValueError(f"Modelfile template for ChatML families {CHATML_FAMILIES} only; got {family!r}")
    before, after = tools_block_parts(family)
    think = QWEN3_EMPTY_THINK if family == "qwen3" and not enable_thinking else ""
    tool_line = '\n{"type": "function", "function": {{ .Function }}}'
    return (
        "{{- if or .System .Tools }}<|im_start|>system\n"
        "{{ if .System }}{{ .System }}{{ if .Tools }}\n\n{{ end }}{{ end }}"
        f"{{{{ if .Tools }}}}{before}{{{{ range .Tools }}}}{tool_line}{{{{ end }}}}{after}{{{{ end }}}}"
        "<|im_end|>\n{{ end }}"
        "{{- range $i, $_ := .Messages }}"
        "{{- $last := eq (len (slice $.Messages $i)) 1 }}"
        '{{- if eq .Role "user" }}<|im_start|>user\n{{ .Content }}<|im_end|>\n'
        '{{ else if eq .Role "assistant" }}<|im_start|>assistant\n'
        "{{ if .Content }}{{ .Content }}{{ else if .ToolCalls }}"
        '{{ range $j, $c := .ToolCalls }}{{ if $j }}\n{{ end }}<tool_call>\n'
        '{"name": "{{ $c.Function.Name }}", "arguments": {{ $c.Function.Arguments }}}\n</tool_call>'
        "{{ end }}{{ end }}{{ if not $last }}<|im_end|>\n{{ end }}"
        '{{ else if eq .Role "tool" }}<|im_start|>user\n<tool_response>\n{{ .Content }}\n'
        "</tool_response><|im_end|>\n{{ end }}"
        '{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant\n'
        f"{think}{{{{ end }}}}"
        "{{- end }}"
    )


def stop_tokens(tokenizer: Any) -> list[str]:
    """ChatML's turn markers plus the tokenizer's own eos, each a single token of its vocabulary."""
    vocab = tokenizer.get_vocab()
    stops = [t for t in (*CHATML_STOPS, tokenizer.eos_token) if t and t in vocab]
    return list(dict.fromkeys(stops))


def modelfile_text(gguf_name: str, family: str, tokenizer: Any, temperature: float = 0.0) -> str:
    """The Modelfile, next to the GGUF it names (``FROM ./file.gguf``)."""
    template = chat_template(family)
    if '"""' in template:
        raise ValueError("the template contains a triple quote; Ollama cannot read it")
    lines = [f"FROM ./{gguf_name}", f'TEMPLATE """{template}"""']
    lines += [f'PARAMETER stop "{stop}"' for stop in stop_tokens(tokenizer)]
    lines.append(f"PARAMETER temperature {temperature:g}")
    return "\n".join(lines) + "\n"


def write_modelfile(folder: Path, gguf_name: str, family: str, tokenizer: Any) -> Path:
    path = Path(folder) / f"Modelfile.{Path(gguf_name).stem.rsplit('-', 1)[-1]}"
    path.write_text(modelfile_text(gguf_name, family, tokenizer), encoding="utf-8")
    return path
