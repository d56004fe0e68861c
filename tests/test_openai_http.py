"""The native client's own rules: which models take it, where each provider's calls go and with which
key, keep-alive connections and their bound per host, proxies, what a hostile reply can and cannot do,
and prices read without litellm. (What both clients do alike is in test_faults.py, run on each.)"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from statewright.runtime.client import ModelError, ModelRequest
from statewright.runtime.model_calls import RetryPolicy
from statewright.runtime.model_client import (
    MODEL_CLIENT_ENV,
    calls_need_litellm,
    default_model_client,
    model_client_choice,
)
from statewright.runtime.model_prices import MODEL_PRICES_ENV, model_price_table
from statewright.runtime.openai_http import OpenAIHTTPClient, OpenAIHTTPTransport, openai_provider
from tests.support.fake_openai_server import Fail, FakeOpenAIServer, Malformed, Reply, Slow

KEY = "sk-native-SECRET-0123456789abcdef"
FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.05, jitter=0, timeout=5)
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def server():
    with FakeOpenAIServer() as running:
        yield running


def ask(model: str = "openai/test-model", **fields) -> ModelRequest:
    fields.setdefault("messages", [{"role": "user", "content": "Write one sentence."}])
    return ModelRequest(role="agent", state="draft", model=model, **fields)


def native(server: FakeOpenAIServer, **options) -> OpenAIHTTPClient:
    options.setdefault("api_key", KEY)
    return OpenAIHTTPClient(retry=options.pop("retry", FAST), api_base=server.url + "/v1", **options)


# ---- which models take the native path ----------------------------------------------------------------


@pytest.mark.parametrize(("model", "provider"), [
    ("openai/gpt-4o-mini", "openai"), ("openai/my-local-llama", "openai"), ("azure/my-deployment", "azure"),
    ("openrouter/openai/gpt-4o", "openrouter"), ("together_ai/meta-llama/Llama-3-8b", "together_ai"),
    ("groq/llama-3.1-8b-instant", "groq"), ("deepseek/deepseek-chat", "deepseek"),
    ("hosted_vllm/qwen", "hosted_vllm"), ("llamafile/smollm", "llamafile"),
    ("anthropic/claude-haiku-4-5", None), ("gemini/gemini-2.0-flash", None), ("ollama/llama3", None),
    ("gpt-4o", None), ("scripted/test", None), ("openai", None),
])
def test_the_providers_of_openai_compatible_servers_take_the_native_path(model, provider):
    found = openai_provider(model)
    assert (found.name if found else None) == provider
    assert calls_need_litellm([model]) is (provider is None)


def test_the_setting_forces_litellm_and_refuses_what_it_does_not_know(monkeypatch):
    monkeypatch.delenv(MODEL_CLIENT_ENV, raising=False)
    assert model_client_choice() == "auto" and type(default_model_client()).__name__ == "OpenAIHTTPClient"
    monkeypatch.setenv(MODEL_CLIENT_ENV, "litellm")
    assert type(default_model_client()).__name__ == "LiteLLMClient"
    assert calls_need_litellm(["openai/gpt-4o-mini"])
    assert type(default_model_client(choice="auto")).__name__ == "OpenAIHTTPClient"  # the option wins
    monkeypatch.setenv(MODEL_CLIENT_ENV, "httpx")
    with pytest.raises(ValueError, match="STATEWRIGHT_MODEL_CLIENT must be auto or litellm, not 'httpx'"):
        default_model_client()
    with pytest.raises(ValueError, match="the model client must be auto or litellm, not 'fast'"):
        model_client_choice("fast")


def test_models_of_other_providers_go_through_litellm_within_one_call(server):
    """A fallback of another provider is litellm's to call, the primary native: one call, two paths."""
    server.enqueue(Fail(503, "primary down"), Fail(503, "primary down"), Fail(503, "primary down"))
    client = native(server)
    assert isinstance(client.transport("openai/test-model"), OpenAIHTTPTransport)
    with pytest.raises(ModelError) as caught:
        client.complete(ask(fallbacks=("anthropic/claude-haiku-4-5",), ))
    kinds = [(e["type"], e["model"]) for e in caught.value.events if e["type"] in ("retry", "fallback")]
    assert kinds[-1] == ("fallback", "anthropic/claude-haiku-4-5")
    assert type(client.transport("anthropic/claude-haiku-4-5")).__name__ == "LiteLLMTransport"


def test_without_litellm_its_models_fail_typed_and_a_native_fallback_takes_over(server, monkeypatch):
    from statewright.runtime import litellm_client

    def missing() -> None:
        raise ModuleNotFoundError("No module named 'litellm'")

    monkeypatch.setattr(litellm_client, "_load_litellm", missing)
    server.enqueue(Reply(text="from the native fallback"))

    response = native(server).complete(ask("anthropic/claude-haiku-4-5", fallbacks=("openai/test-model",)))

    assert response.content == "from the native fallback" and response.attempts == 1
    [fallback] = [e for e in response.events if e["type"] == "fallback"]
    assert "litellm, which cannot be imported here (No module named 'litellm')" in fallback["error"]
    with pytest.raises(ModelError) as caught:
        native(server).complete(ask("anthropic/claude-haiku-4-5"))
    assert caught.value.attempts == 0 and "install litellm" in str(caught.value)


# ---- where calls go ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "variables", "path", "sent", "header"), [
    ("groq/llama-3.1-8b-instant", {"GROQ_API_BASE": "{url}/groq/v1", "GROQ_API_KEY": KEY},
     "/groq/v1/chat/completions", "llama-3.1-8b-instant", ("authorization", f"Bearer {KEY}")),
    ("openrouter/openai/gpt-4o", {"OPENROUTER_API_BASE": "{url}/api/v1/", "OPENROUTER_API_KEY": KEY},
     "/api/v1/chat/completions", "openai/gpt-4o", ("authorization", f"Bearer {KEY}")),
    ("azure/my-deployment", {"AZURE_API_BASE": "{url}", "AZURE_API_KEY": KEY, "AZURE_API_VERSION": "2025-01-01"},
     "/openai/deployments/my-deployment/chat/completions?api-version=2025-01-01", "my-deployment",
     ("api-key", KEY)),
    ("hosted_vllm/qwen", {"HOSTED_VLLM_API_BASE": "{url}/v1"}, "/v1/chat/completions", "qwen", None),
    ("openai/local", {"OPENAI_BASE_URL": "{url}/first", "OPENAI_API_BASE": "{url}/second"},
     "/first/chat/completions", "local", None),
])
def test_each_provider_is_called_where_its_variables_say_with_its_key(server, monkeypatch, model, variables,
                                                                      path, sent, header):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value.format(url=server.url))
    server.enqueue(Reply(text="ok"))

    response = OpenAIHTTPClient(retry=FAST).complete(ask(model))

    assert response.content == "ok" and response.model == model
    [request] = server.requests
    assert request.path == path and request.body["model"] == sent
    if header is None:  # a server of one's own, named without a key: no credentials are sent
        assert "authorization" not in request.headers and "api-key" not in request.headers
    else:
        assert request.headers[header[0]] == header[1]


def test_a_provider_without_an_endpoint_says_which_variable_names_it(monkeypatch):
    monkeypatch.delenv("AZURE_API_BASE", raising=False)
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)

    with pytest.raises(ModelError) as caught:
        OpenAIHTTPClient(retry=FAST).complete(ask("azure/my-deployment"))

    assert caught.value.attempts == 1 and "set AZURE_API_BASE or AZURE_OPENAI_ENDPOINT" in str(caught.value)


def test_reasoning_models_get_max_completion_tokens_and_no_temperature_but_one(server):
    server.enqueue(Reply(text="thought"), Reply(text="plain"))
    client = native(server)

    client.complete(ask("openai/o3-mini", max_tokens=50, temperature=0.2))
    client.complete(ask("openai/gpt-4o-mini", max_tokens=50, temperature=0.2))

    reasoning, plain = (r.body for r in server.requests)
    assert reasoning["max_completion_tokens"] == 50 and "max_tokens" not in reasoning
    assert "temperature" not in reasoning
    assert (plain["max_tokens"], plain["temperature"]) == (50, 0.2)


def test_extra_body_fields_are_sent_in_the_body_but_never_replace_the_model_or_messages(server):
    server.enqueue(Reply(text="ok"))

    native(server).complete(ask(extra_body={"grammar": "root ::= \"ok\"", "model": "evil", "messages": []}))

    body = server.requests[0].body
    assert body["grammar"] == 'root ::= "ok"' and body["model"] == "test-model" and body["messages"]


@pytest.mark.parametrize("key", [f"{KEY}\r\nX-Injected: yes", f"{KEY}\nHost: elsewhere", "sk-\u2603-snowman"])
def test_a_key_no_header_can_carry_is_refused_before_anything_is_sent(server, key):
    with pytest.raises(ModelError) as caught:
        native(server, api_key=key).complete(ask())

    assert server.requests == [] and caught.value.attempts == 1
    assert "a character a request header cannot carry" in str(caught.value)
    assert KEY not in str(caught.value)


def test_a_plain_http_endpoint_goes_through_the_proxy_the_environment_names(server, monkeypatch):
    monkeypatch.setenv("http_proxy", server.url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    server.enqueue(Reply(text="via the proxy"))

    response = OpenAIHTTPClient(retry=FAST, api_base="http://models.example.invalid/v1", api_key=KEY).complete(ask())

    assert response.content == "via the proxy"
    [request] = server.requests
    assert request.path == "http://models.example.invalid/v1/chat/completions"
    assert request.headers["host"] == "models.example.invalid"


# ---- connections ---------------------------------------------------------------------------------------


def test_calls_one_after_another_share_one_connection(server):
    server.enqueue(*[Reply(text=f"reply {n}") for n in range(6)])
    client = native(server)

    async def six() -> list[str]:
        return [(await client.acomplete(ask())).content for _ in range(6)]

    assert asyncio.run(six()) == [f"reply {n}" for n in range(6)]
    assert len({r.connection for r in server.requests}) == 1


def test_clients_of_one_process_share_its_connections(server):
    server.enqueue(*[Reply(text=f"reply {n}") for n in range(4)])

    async def four_clients() -> None:
        for _ in range(4):
            await native(server).acomplete(ask())

    asyncio.run(four_clients())
    assert len({r.connection for r in server.requests}) == 1


def test_no_more_requests_are_in_flight_to_a_host_than_its_bound(server, monkeypatch):
    monkeypatch.setenv("STATEWRIGHT_HTTP_CONNECTIONS", "3")
    server.enqueue(*[Slow(0.15, Reply(text="slow")) for _ in range(10)])
    client = native(server)

    async def ten_at_once() -> list[str]:
        replies = await asyncio.gather(*(client.acomplete(ask()) for _ in range(10)))
        return [r.content for r in replies]

    assert asyncio.run(ten_at_once()) == ["slow"] * 10
    assert server.max_in_flight == 3


def test_a_loops_idle_connections_are_closed_when_it_ends():
    """`asyncio.run` shuts the loop's async generators down; the pool's watch closes its connections then,
    so no connection outlives its loop (Python reports one as an unclosed transport)."""
    code = f"""
import gc, sys, warnings
warnings.simplefilter("error")
sys.path.insert(0, {str(ROOT)!r})
from tests.support.fake_openai_server import FakeOpenAIServer, Reply
from statewright.runtime.client import ModelRequest
from statewright.runtime.openai_http import OpenAIHTTPClient
with FakeOpenAIServer() as server:
    server.enqueue(Reply(text="one"), Reply(text="two"))
    client = OpenAIHTTPClient(api_base=server.url + "/v1", api_key="sk-x")
    for _ in range(2):  # two event loops, one after the other
        client.complete(ModelRequest(role="agent", state="s", model="openai/m",
                                     messages=[{{"role": "user", "content": "hi"}}]))
    gc.collect()
    print(len({{r.connection for r in server.requests}}))
"""
    done = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"  # a connection per loop
    assert "unclosed" not in done.stderr and "ResourceWarning" not in done.stderr


# ---- what a hostile or broken server can send ------------------------------------------------------------


@pytest.mark.parametrize("body", [
    '{"choices": "none"}', '{"choices": [7]}', '{"choices": [{"message": "text"}]}', "[1, 2, 3]", '"just text"',
    '{"choices": [{"message": {"content": 12, "tool_calls": "x"}}], "usage": {"prompt_tokens": -5}}',
    '{"choices": [{"message": {"content": null, "tool_calls": [7, {"function": "f"}, {"function": {}}]}}]}',
    '{"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": true, "completion_tokens": 1e400}}',
    '{"choices": [{"message": {"content": [{"type": "text", "text": "part"}, {"type": "image"}, 3]}}]}',
    "[" * 100_000,
])
def test_a_reply_of_any_shape_ends_in_an_answer_or_a_typed_error(server, body):
    server.enqueue(Malformed(body), Malformed(body), Malformed(body))

    try:
        response = native(server).complete(ask())
    except ModelError as error:
        assert "failed after" in str(error) and "Traceback" not in str(error)
    else:
        assert isinstance(response.content, str)
        assert response.prompt_tokens >= 0 and response.completion_tokens >= 0
        assert all(isinstance(call.arguments, str) and isinstance(call.name, str) for call in response.tool_calls)


def test_an_error_page_that_is_not_json_is_reported_by_its_text_and_retried(server):
    server.enqueue(Fail(502, "<html><body>Bad gateway</body></html>"), Reply(text="back"))

    response = native(server).complete(ask())

    assert response.content == "back"
    [retry] = [e for e in response.events if e["type"] == "retry"]
    assert retry["error"].startswith("BadGatewayError (502): ")


def test_retry_after_ms_is_read_before_retry_after(server):
    transport = OpenAIHTTPTransport(native(server))
    from statewright.runtime.openai_http import OpenAICallError

    error = OpenAICallError("RateLimitError", "slow", status=429, retryable=True,
                            headers={"retry-after-ms": "1500", "retry-after": "9"})
    assert transport.retry_after(error) == 1.5
    assert transport.retry_after(OpenAICallError("RateLimitError", "x", status=429,
                                                 headers={"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0


# ---- prices and capabilities, without litellm -------------------------------------------------------------


def test_the_native_path_costs_a_call_as_litellm_does(server):
    from statewright.runtime.litellm_client import LiteLLMClient

    server.enqueue(Reply(text="priced", prompt_tokens=1200, completion_tokens=300), model="gpt-4o-mini")
    server.enqueue(Reply(text="priced", prompt_tokens=1200, completion_tokens=300), model="gpt-4o-mini")
    ours = native(server).complete(ask("openai/gpt-4o-mini"))
    theirs = LiteLLMClient(retry=FAST, api_base=server.url + "/v1", api_key=KEY).complete(ask("openai/gpt-4o-mini"))

    assert ours.cost_usd > 0 and ours.cost_usd == pytest.approx(theirs.cost_usd, rel=1e-9)
    assert native(server).estimate(ask("openai/gpt-4o-mini", max_tokens=100))[1] > 0


def test_a_price_file_of_ones_own_prices_models_the_table_does_not_know(server, monkeypatch, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/house-model": {"input_cost_per_token": 0.001, "output_cost_per_token": 0.002,
                                                         "supports_response_schema": True}}))
    monkeypatch.setenv(MODEL_PRICES_ENV, str(prices))
    server.enqueue(Reply(json={"ok": True}, prompt_tokens=10, completion_tokens=5))

    response = native(server).complete(ask("openai/house-model", response_schema={"type": "object"}))

    assert response.cost_usd == pytest.approx(10 * 0.001 + 5 * 0.002)
    assert server.requests[0].body["response_format"]["type"] == "json_schema"  # what the file says it supports
    assert "gpt-4o-mini" in model_price_table(str(prices))  # litellm's table is still read beside it


def test_a_price_file_that_cannot_be_read_prices_nothing(monkeypatch, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert "gpt-4o-mini" in model_price_table(str(broken))
    assert set(model_price_table(str(tmp_path / "missing.json"))) == set(model_price_table(""))


# ---- https ---------------------------------------------------------------------------------------------

TLS_CLIENT = """
import json, os, ssl, sys
sys.path.insert(0, {root!r})
from tests.support.fake_openai_server import FakeOpenAIServer, Reply
from statewright.runtime.client import ModelError, ModelRequest
from statewright.runtime.model_calls import RetryPolicy
from statewright.runtime.openai_http import OpenAIHTTPClient
server = FakeOpenAIServer()
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
server._httpd.socket = context.wrap_socket(server._httpd.socket, server_side=True)
with server:
    server.enqueue(Reply(text="over tls"))
    url = server.url.replace("http://127.0.0.1", "https://localhost") + "/v1"
    client = OpenAIHTTPClient(retry=RetryPolicy(max_retries=0, timeout=10), api_base=url, api_key="sk-x")
    try:
        print(json.dumps({{"content": client.complete(ModelRequest(role="agent", state="s", model="openai/m",
                          messages=[{{"role": "user", "content": "hi"}}])).content}}))
    except ModelError as error:
        print(json.dumps({{"error": str(error)}}))
"""


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    done = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                           "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                           "-keyout", str(key), "-out", str(cert)], capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        pytest.skip(f"openssl cannot make a certificate here: {done.stderr[-200:]!r}")
    return cert, key


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_https_endpoints_are_verified_against_the_certificates_ssl_cert_file_names(certificate, trusted):
    cert, key = certificate
    env = {name: value for name, value in os.environ.items() if not name.endswith(("_proxy", "_PROXY"))}
    if trusted:
        env["SSL_CERT_FILE"] = str(cert)
    else:
        env.pop("SSL_CERT_FILE", None)
    done = subprocess.run([sys.executable, "-c", TLS_CLIENT.format(root=str(ROOT)), str(cert), str(key)],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if trusted:
        assert answer == {"content": "over tls"}
    else:  # a certificate nobody vouches for: no reply is read from that server
        assert "APIConnectionError" in answer["error"] and "certificate verify failed" in answer["error"]


def test_a_hosts_slots_go_to_waiters_in_order_and_none_is_lost_to_a_cancelled_one():
    from statewright.runtime.http_pool import _Slots

    async def scenario() -> tuple[list[str], int]:
        slots = _Slots(2)
        order: list[str] = []
        gate = asyncio.Event()

        async def hold(name: str) -> None:
            async with slots:
                order.append(name)
                await gate.wait()

        holders = [asyncio.create_task(hold(n)) for n in ("a", "b", "c", "d", "e")]
        await asyncio.sleep(0.01)
        holders[2].cancel()  # "c" gives up while it waits
        await asyncio.sleep(0.01)
        gate.set()
        await asyncio.gather(*holders, return_exceptions=True)
        # a waiter cancelled in the moment it was handed a slot hands it on
        async with slots, slots:
            late = asyncio.create_task(hold("late"))
            await asyncio.sleep(0.01)
        late.cancel()
        await asyncio.gather(late, return_exceptions=True)
        return order, slots.free

    order, free = asyncio.run(scenario())
    assert order == ["a", "b", "d", "e"] and free == 2


def test_a_price_file_is_read_entry_by_entry_whatever_an_entry_holds(tmp_path):
    """Entries become prices as json reads them; an entry with objects inside, or with no price at all,
    prices as it says (0 where it says nothing)."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({
        "house/tiered": {"input_cost_per_token": 0.5, "output_cost_per_token": 0.25,
                         "tiers": {"input_cost_per_token": 0.9, "above": [{"output_cost_per_token": 0.8}]}},
        "house/bare": {"max_tokens": 10},
        "house/not-an-entry": [1, 2],
    }))
    table = model_price_table(str(prices))
    assert (table["house/tiered"].input, table["house/tiered"].output) == (0.5, 0.25)
    assert table["house/tiered"].cost(2, 4) == pytest.approx(2.0)
    assert (table["house/bare"].input, table["house/bare"].output) == (0.0, 0.0)
    assert "house/not-an-entry" not in table
