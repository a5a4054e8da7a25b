"""Chat templates: assay's renderer must produce exactly what jinja2 produces from the model's own template,
configured as transformers configures it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
raise_exception), for several conversations with and without the generation prompt; where the template
raises, assay must fail with the same message.

Templates: SmolLM2's, read from the GGUF model file; the others are the published templates of their model
families (Qwen2 ChatML, Llama 3, Gemma 3 and Gemma 2, Llama 2, Mistral v0.1), written out here because those
models are not available offline (the Gemma 3 GGUF carries no template)."""
import json
import os
import subprocess
import sys
import tempfile

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from gguf import GGUFReader

MODELS = os.path.join(os.environ["ASSAY_SOURCE_DIR"], ".models")
HELPER = os.path.join(os.environ["ASSAY_BUILD_DIR"], "test_chat_template")

smol = GGUFReader(os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")).fields["tokenizer.chat_template"].contents()

QWEN2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
         "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
         "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
         "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
          "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
GEMMA3 = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""
GEMMA2 = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
          "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
          "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}")
LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
          "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
          "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
          "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
          "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
          "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
           "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
           "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
           "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")

TEMPLATES = [("SmolLM2 (GGUF)", smol, "chatml", "<|im_start|>", "<|im_end|>"),
             ("Qwen2", QWEN2, "chatml", None, "<|im_end|>"),
             ("Llama 3", LLAMA3, "llama3", "<|begin_of_text|>", "<|eot_id|>"),
             ("Gemma 3", GEMMA3, "gemma", "<bos>", "<eos>"),
             ("Gemma 2", GEMMA2, "gemma", "<bos>", "<eos>"),
             ("Llama 2", LLAMA2, "llama2", "<s>", "</s>"),
             ("Mistral v0.1", MISTRAL, "mistral", "<s>", "</s>")]

CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "Sys"}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
     {"role": "user", "content": "Again"}],
    [{"role": "user", "content": "  padded \n"}, {"role": "assistant", "content": " Sure. \u3000"}, {"role": "user", "content": "\tagain\u00a0"}],
    [{"role": "user", "content": "héllo 🦙 <b>x</b> {{ not jinja }} 'quotes' \"dq\""}, {"role": "assistant", "content": "ok\n\nmultiline\n"}],
    [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
    [{"role": "system", "content": "  spaced system  "}, {"role": "user", "content": "x"}],

]


def render(template, bos, eos, messages, gen):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=gen, bos_token=bos or "", eos_token=eos or "")


cases = []
for name, template, family, bos, eos in TEMPLATES:
    for i, conv in enumerate(CONVERSATIONS):
        for gen in (False, True):
            case = {"name": f"{name} conversation {i} gen={gen}", "template": template, "family": family,
                    "bos": bos, "eos": eos, "messages": conv, "add_generation_prompt": gen}
            try:
                case["expected"] = render(template, bos, eos, conv, gen)
            except TemplateError as e:
                case["error"] = str(e)
            cases.append(case)

with tempfile.TemporaryDirectory(prefix="assay_chat_") as tmp:
    path = os.path.join(tmp, "cases.json")
    with open(path, "w") as f:
        json.dump(cases, f)
    rc = subprocess.run([HELPER, path]).returncode
print(f"{len(cases)} cases ({sum('error' in c for c in cases)} where the template raises)")
sys.exit(rc)
