"""Chat templates for offline stand-in models (random-weight benchmark models, tests)."""

# A compact chat template in the style of Qwen3's (tools=, <tool_call> blocks, enable_thinking),
# written here: offline stand-ins for Qwen3 (random-weight benchmark models, tests) use it with
# another tokenizer, and detect_family() recognises it as qwen3.
QWEN3_STYLE_TEMPLATE = (
    "{% if tools %}{{ '<|im_start|>system\\n' }}"
    "{% if messages[0].role == 'system' %}{{ messages[0].content + '\\n\\n' }}{% endif %}"
    "{{ '# Tools\\n<tools>' }}{% for tool in tools %}{{ '\\n' + (tool | tojson) }}{% endfor %}"
    "{{ '\\n</tools><|im_end|>\\n' }}{% endif %}"
    "{% for m in messages %}{% if not (tools and m.role == 'system') %}"
    "{{ '<|im_start|>' + m.role + '\\n' + m.content }}"
    "{% if m.tool_calls %}{% for tc in m.tool_calls %}"
    "{{ '\\n<tool_call>\\n' + (tc.function | tojson) + '\\n</tool_call>' }}{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}{% endif %}"
)
