"""Tests for decide.py against a local mock of the Anthropic and OpenAI-compatible APIs.

Run from the repository root:
    python3 -m unittest discover -s examples/decider -v
"""

import json
import os
import subprocess
import sys
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
DECIDE = os.path.join(HERE, "decide.py")

CLAUDE_OPTIONS = [
    "Yes",
    "Yes, and don't ask again for git status commands",
    "No, and tell Claude what to do differently (esc)",
]
OPENCODE_OPTIONS = ["Allow once", "Allow always", "Reject"]
CODEX_OPTIONS = [
    "Yes, proceed",
    "Yes, and don't ask again for this command",
    "No, and tell Codex what to do differently",
]


def make_request(options=None, subject="git status", screen="", last_reply="", **extra):
    req = {
        "session": "api",
        "cli": "claude",
        "dir": "/home/me/proj",
        "prompt": {
            "id": "ab12",
            "kind": "permission",
            "text": "Bash command\n  %s\nDo you want to proceed?" % subject,
            "options": CLAUDE_OPTIONS if options is None else options,
            "subject": subject,
        },
        "screen": screen or "> check the repo state\n\nBash command\n  %s\nDo you want to proceed?" % subject,
        "last_reply": last_reply or "I'll check the repository state.",
    }
    req.update(extra)
    return req


class MockHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw.decode("utf-8"))
        except ValueError:
            body = None
        srv = self.server
        srv.requests.append(
            {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body, "raw": raw}
        )
        if srv.delay:
            time.sleep(srv.delay)
        if self.path == "/v1/messages":
            payload = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": srv.reply_text}],
                "stop_reason": "end_turn",
            }
        elif self.path == "/v1/chat/completions":
            payload = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": srv.reply_text}, "finish_reason": "stop"}],
            }
        else:
            self._send(404, b'{"error": "not found"}')
            return
        if srv.status != 200:
            self._send(srv.status, b'{"error": {"message": "internal error"}}')
            return
        self._send(200, srv.raw_body if srv.raw_body is not None else json.dumps(payload).encode("utf-8"))

    def _send(self, status, data):
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)


class MockServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass

    def reset(self):
        self.requests = []
        self.reply_text = '{"decision": "ask", "reason": "default"}'
        self.status = 200
        self.delay = 0
        self.raw_body = None


class DeciderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = MockServer(("127.0.0.1", 0), MockHandler)
        cls.server.reset()
        cls.thread = threading.Thread(target=cls.server.serve_forever, daemon=True)
        cls.thread.start()
        cls.base = "http://127.0.0.1:%d" % cls.server.server_address[1]

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        self.server.reset()

    # helpers

    def env(self, provider_keys=("anthropic",), **extra):
        env = {k: v for k, v in os.environ.items()
               if not k.upper().endswith("_PROXY")
               and not k.startswith(("ANTHROPIC_", "OPENAI_", "CLIBOT_DECIDER_"))}
        if "anthropic" in provider_keys:
            env["ANTHROPIC_API_KEY"] = "sk-ant-test-key"
            env["ANTHROPIC_BASE_URL"] = self.base
        if "openai" in provider_keys:
            env["OPENAI_API_KEY"] = "sk-openai-test-key"
            env["OPENAI_BASE_URL"] = self.base + "/v1"
        env.update(extra)
        return env

    def run_decider(self, request, env, raw_input=None):
        data = raw_input if raw_input is not None else json.dumps(request).encode("utf-8")
        proc = subprocess.run(
            [sys.executable, DECIDE], input=data, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20,
        )
        self.assertEqual(proc.returncode, 0, proc.stderr.decode())
        out = proc.stdout.decode("utf-8")
        lines = out.splitlines()
        self.assertEqual(len(lines), 1, "expected exactly one line, got %r" % out)
        answer = json.loads(lines[0])
        self.assertIsInstance(answer, dict)
        return answer

    def decide_with(self, reply_text, options=None, provider_keys=("anthropic",), **env_extra):
        self.server.reply_text = reply_text
        return self.run_decider(make_request(options), self.env(provider_keys, **env_extra))

    def assertAsk(self, answer, note_part=None):
        self.assertIs(answer.get("ask"), True, answer)
        self.assertNotIn("choice", answer)
        self.assertIsInstance(answer.get("note"), str)
        if note_part is not None:
            self.assertIn(note_part, answer["note"])

    # mapping of decisions onto options

    def test_allow_maps_to_yes_once_for_claude(self):
        answer = self.decide_with('{"decision": "allow", "reason": "read-only git status in the project"}')
        self.assertEqual(answer["choice"], "1")
        self.assertEqual(answer["note"], "allow \u2014 read-only git status in the project")
        self.assertEqual(len(self.server.requests), 1)

    def test_allow_maps_to_allow_once_for_opencode(self):
        answer = self.decide_with('{"decision": "allow", "reason": "safe"}', options=OPENCODE_OPTIONS)
        self.assertEqual(answer["choice"], "1")
        self.assertTrue(answer["note"].startswith("allow"))

    def test_allow_skips_broad_options(self):
        options = ["Yes, allow all edits during this session", "Yes, always", "Yes, proceed", "No"]
        answer = self.decide_with('{"decision": "allow", "reason": "safe"}', options=options)
        self.assertEqual(answer["choice"], "3")

    def test_allow_for_codex_options(self):
        answer = self.decide_with('{"decision": "allow", "reason": "safe"}', options=CODEX_OPTIONS)
        self.assertEqual(answer["choice"], "1")

    def test_allow_without_a_once_option_asks(self):
        answer = self.decide_with('{"decision": "allow", "reason": "safe"}', options=["Allow always", "Reject"])
        self.assertAsk(answer, "safe")

    def test_deny_maps_to_no_for_claude(self):
        answer = self.decide_with('{"decision": "deny", "reason": "deletes files"}')
        self.assertEqual(answer["choice"], "3")
        self.assertEqual(answer["note"], "deny \u2014 deletes files")

    def test_deny_maps_to_reject_for_opencode(self):
        answer = self.decide_with('{"decision": "deny", "reason": "uploads data"}', options=OPENCODE_OPTIONS)
        self.assertEqual(answer["choice"], "3")

    def test_deny_falls_back_to_last_option(self):
        answer = self.decide_with('{"decision": "deny", "reason": "no"}', options=["Yes", "Tell me more"])
        self.assertEqual(answer["choice"], "2")

    def test_deny_never_picks_a_yes_option(self):
        answer = self.decide_with('{"decision": "deny", "reason": "bad"}', options=["Yes", "Yes, always"])
        self.assertAsk(answer, "bad")

    def test_ask_gives_ask_with_the_reason(self):
        answer = self.decide_with('{"decision": "ask", "reason": "writes outside the project"}')
        self.assertAsk(answer, "writes outside the project")

    # parsing the model's answer

    def test_fenced_json_is_parsed(self):
        reply = 'Here is my answer:\n```json\n{"decision": "allow", "reason": "lists files"}\n```\n'
        answer = self.decide_with(reply)
        self.assertEqual(answer["choice"], "1")
        self.assertIn("lists files", answer["note"])

    def test_decision_is_case_insensitive(self):
        answer = self.decide_with('{"decision": "DENY", "reason": "force push"}')
        self.assertEqual(answer["choice"], "3")

    def test_garbage_from_the_model_asks(self):
        answer = self.decide_with("Sure! I think this is fine, go ahead.")
        self.assertAsk(answer)
        self.assertNotIn("choice", answer)

    def test_unknown_decision_asks(self):
        answer = self.decide_with('{"decision": "maybe", "reason": "hmm"}')
        self.assertAsk(answer, "unknown decision")

    def test_non_json_http_body_asks(self):
        self.server.raw_body = b"<html>gateway</html>"
        answer = self.run_decider(make_request(), self.env())
        self.assertAsk(answer, "not JSON")

    # failures

    def test_http_500_asks(self):
        self.server.status = 500
        answer = self.run_decider(make_request(), self.env())
        self.assertAsk(answer, "HTTP 500")

    def test_unreachable_api_asks(self):
        env = self.env(ANTHROPIC_BASE_URL="http://127.0.0.1:1")
        answer = self.run_decider(make_request(), env)
        self.assertAsk(answer, "model API")

    def test_http_timeout_asks(self):
        self.server.delay = 2
        started = time.monotonic()
        answer = self.run_decider(make_request(), self.env(CLIBOT_DECIDER_HTTP_TIMEOUT="0.5"))
        self.assertLess(time.monotonic() - started, 1.9)
        self.assertAsk(answer)

    def test_no_key_asks_and_names_the_keys(self):
        answer = self.run_decider(make_request(), self.env(provider_keys=()))
        self.assertAsk(answer, "ANTHROPIC_API_KEY")
        self.assertIn("OPENAI_API_KEY", answer["note"])
        self.assertEqual(self.server.requests, [])

    def test_forced_provider_without_its_key_asks(self):
        answer = self.run_decider(make_request(), self.env(CLIBOT_DECIDER_PROVIDER="openai"))
        self.assertAsk(answer, "OPENAI_API_KEY")
        self.assertEqual(self.server.requests, [])

    # pre-checks without the model

    def test_no_prompt_asks_without_calling_the_model(self):
        req = make_request()
        del req["prompt"]
        answer = self.run_decider(req, self.env())
        self.assertAsk(answer, "no prompt")
        self.assertEqual(self.server.requests, [])

    def test_no_options_asks_without_calling_the_model(self):
        answer = self.run_decider(make_request(options=[]), self.env())
        self.assertAsk(answer, "no options")
        self.assertEqual(self.server.requests, [])

    # open questions (answer_questions)

    def open_question(self, text="Which database should I use?", kind="question", free_text=True):
        request = make_request(options=[])
        request["prompt"]["kind"] = kind
        request["prompt"]["text"] = text
        if free_text:
            request["free_text"] = True
        return request

    def test_an_open_question_is_answered_in_words(self):
        self.server.reply_text = '{"answer": " PostgreSQL  16 ", "reason": "the user chose it earlier"}'
        answer = self.run_decider(self.open_question(), self.env())
        self.assertEqual(answer, {"text": "PostgreSQL 16", "note": "the user chose it earlier"})
        body = self.server.requests[0]["body"]
        self.assertIn("Answer it on the user's behalf", body["system"])
        self.assertIn("Which database should I use?", body["messages"][0]["content"])

    def test_an_open_question_the_model_leaves_is_asked(self):
        self.server.reply_text = '{"decision": "ask", "reason": "the user never said"}'
        self.assertAsk(self.run_decider(self.open_question(), self.env()), "never said")

    def test_an_open_question_without_free_text_or_a_secret_is_never_sent(self):
        for request in (self.open_question(free_text=False), self.open_question(kind="secret")):
            self.server.reset()
            self.assertAsk(self.run_decider(request, self.env()), "no options")
            self.assertEqual(self.server.requests, [])

    def test_a_too_long_answer_is_asked(self):
        self.server.reply_text = json.dumps({"answer": "x" * 600, "reason": "long"})
        self.assertAsk(self.run_decider(self.open_question(), self.env()), "too long")

    def test_invalid_input_asks(self):
        answer = self.run_decider(None, self.env(), raw_input=b"not json at all")
        self.assertAsk(answer, "not valid JSON")
        self.assertEqual(self.server.requests, [])

    # what is sent

    def test_anthropic_request_contents(self):
        self.server.reply_text = '{"decision": "allow", "reason": "ok"}'
        env = self.env(CLIBOT_DECIDER_MODEL="claude-test-model", SECRET_TOKEN_FOR_TEST="do-not-send-4711")
        answer = self.run_decider(make_request(subject="git log --oneline -5"), env)
        self.assertEqual(answer["choice"], "1")
        self.assertEqual(len(self.server.requests), 1)
        req = self.server.requests[0]
        self.assertEqual(req["path"], "/v1/messages")
        self.assertEqual(req["headers"].get("x-api-key"), "sk-ant-test-key")
        self.assertEqual(req["headers"].get("anthropic-version"), "2023-06-01")
        self.assertIn("application/json", req["headers"].get("content-type", ""))
        body = req["body"]
        self.assertEqual(body["model"], "claude-test-model")
        self.assertEqual(body["max_tokens"], 300)
        self.assertIn('When unsure, answer "ask"', body["system"])
        self.assertIn("Never allow", body["system"])
        self.assertIn("privilege escalation", body["system"])
        user = body["messages"][0]["content"]
        self.assertEqual(body["messages"][0]["role"], "user")
        self.assertIn("git log --oneline -5", user)
        self.assertIn("/home/me/proj", user)
        self.assertIn("No, and tell Claude what to do differently (esc)", user)
        self.assertNotIn(b"do-not-send-4711", req["raw"])
        self.assertNotIn(b"SECRET_TOKEN_FOR_TEST", req["raw"])

    def test_anthropic_default_model(self):
        self.decide_with('{"decision": "ask", "reason": "x"}')
        self.assertEqual(self.server.requests[0]["body"]["model"], "claude-3-5-haiku-latest")

    def test_openai_request_contents(self):
        answer = self.decide_with('{"decision": "allow", "reason": "ok"}', provider_keys=("openai",))
        self.assertEqual(answer["choice"], "1")
        req = self.server.requests[0]
        self.assertEqual(req["path"], "/v1/chat/completions")
        self.assertEqual(req["headers"].get("authorization"), "Bearer sk-openai-test-key")
        self.assertNotIn("x-api-key", req["headers"])
        body = req["body"]
        self.assertEqual(body["model"], "gpt-4o-mini")
        self.assertEqual(body["messages"][0]["role"], "system")
        self.assertIn('When unsure, answer "ask"', body["messages"][0]["content"])
        self.assertEqual(body["messages"][1]["role"], "user")
        self.assertIn("git status", body["messages"][1]["content"])

    def test_screen_and_reply_are_truncated_to_their_tail(self):
        screen = "S" * 9000 + "SCREEN-END"
        reply = "R" * 9000 + "REPLY-END"
        self.server.reply_text = '{"decision": "ask", "reason": "x"}'
        self.run_decider(make_request(screen=screen, last_reply=reply), self.env())
        user = self.server.requests[0]["body"]["messages"][0]["content"]
        self.assertIn("SCREEN-END", user)
        self.assertIn("REPLY-END", user)
        self.assertLess(user.count("S"), 4100)
        self.assertLess(user.count("R"), 4100)
        self.assertLess(len(user), 10000)

    # provider choice

    def test_anthropic_preferred_when_both_keys_are_set(self):
        self.decide_with('{"decision": "allow", "reason": "ok"}', provider_keys=("anthropic", "openai"))
        self.assertEqual([r["path"] for r in self.server.requests], ["/v1/messages"])

    def test_provider_forced_to_openai(self):
        answer = self.decide_with('{"decision": "deny", "reason": "no"}', provider_keys=("anthropic", "openai"),
                                  CLIBOT_DECIDER_PROVIDER="openai")
        self.assertEqual(answer["choice"], "3")
        self.assertEqual([r["path"] for r in self.server.requests], ["/v1/chat/completions"])

    def test_provider_forced_to_anthropic(self):
        self.decide_with('{"decision": "allow", "reason": "ok"}', provider_keys=("anthropic", "openai"),
                         CLIBOT_DECIDER_PROVIDER="Anthropic")
        self.assertEqual([r["path"] for r in self.server.requests], ["/v1/messages"])

    def test_unknown_provider_asks(self):
        answer = self.decide_with('{"decision": "allow", "reason": "ok"}', CLIBOT_DECIDER_PROVIDER="gemini")
        self.assertAsk(answer, "CLIBOT_DECIDER_PROVIDER")
        self.assertEqual(self.server.requests, [])


if __name__ == "__main__":
    unittest.main()
