#!/usr/bin/env python3
"""Sends one chat request to a running swizzle-rt with the official OpenAI SDK and prints
the answer and the usage. Usage: ask.py --base-url http://127.0.0.1:8080/v1 "question" """
import argparse

import openai

ap = argparse.ArgumentParser()
ap.add_argument("--base-url", required=True)
ap.add_argument("--max-tokens", type=int, default=200)
ap.add_argument("prompt")
args = ap.parse_args()

client = openai.OpenAI(base_url=args.base_url, api_key="unused")
model = client.models.list().data[0].id
resp = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": args.prompt}],
    max_tokens=args.max_tokens,
    temperature=0,
)
print(f"> {args.prompt}")
print(resp.choices[0].message.content)
u = resp.usage
print(f"[model {resp.model}; finish {resp.choices[0].finish_reason}; prompt {u.prompt_tokens} tokens "
      f"({u.prompt_tokens_details.cached_tokens if u.prompt_tokens_details else 0} cached), completion {u.completion_tokens}]")
