#!/usr/bin/env python3
"""The OpenAI Python SDK's chat, completions and embeddings calls against a gateway.

Usage: python3 benches/e2e/openai_sdk_check.py BASE_URL MODEL [CA_PEM]
With CA_PEM (an https BASE_URL), the SDK trusts that CA (e.g. deploy/tls/make-local-ca.sh's).
Exits 0 when every call answered as the SDK expects, 2 when the `openai` package is missing
(the Rust test `openai_sdk` skips then), 1 on any failure.
"""
import sys

try:
    import openai
except ImportError:
    print("openai package not installed (pip install openai)", file=sys.stderr)
    sys.exit(2)


def main() -> int:
    base, model = sys.argv[1], sys.argv[2]
    extra = {}
    if len(sys.argv) > 3:
        extra["http_client"] = openai.DefaultHttpxClient(verify=sys.argv[3])
    client = openai.OpenAI(
        base_url=base.rstrip("/") + "/v1", api_key="sk-unused", max_retries=0, **extra
    )

    chat = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hello there"}], max_tokens=8
    )
    assert chat.choices[0].message.content, chat
    assert chat.usage.completion_tokens > 0, chat.usage

    pieces, usage = [], None
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "stream please"}],
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        if chunk.usage is not None:
            usage = chunk.usage
    assert pieces, "no streamed content"
    assert usage is not None and usage.completion_tokens > 0, usage

    completion = client.completions.create(model=model, prompt="once upon a time", max_tokens=6)
    assert completion.choices[0].text, completion
    assert completion.usage.total_tokens > 0, completion.usage

    # The SDK asks for base64 by default and decodes it to floats itself.
    default = client.embeddings.create(model=model, input=["first text", "second text"])
    assert len(default.data) == 2 and len(default.data[0].embedding) > 0, default
    assert default.usage.prompt_tokens > 0, default.usage
    floats = client.embeddings.create(model=model, input="first text", encoding_format="float")
    assert all(
        abs(a - b) < 1e-6 for a, b in zip(floats.data[0].embedding, default.data[0].embedding)
    ), "base64 and float embeddings differ"

    print(
        f"openai {openai.__version__}{' over TLS' if extra else ''}: "
        f"chat, chat stream, completions, embeddings ok "
        f"(dims {len(default.data[0].embedding)})"
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as error:  # any SDK or assertion error is a failure with its message
        print(f"FAILED: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
