"""An agent that speaks Codex's app-server protocol (as `codex app-server`
0.171 does, on the wire) without a model: the bridge test's stand-in for
the turns a real Codex cannot run without a key.

JSON-RPC without the "jsonrpc" member, one message per line. A turn's reply
is "echo: PROMPT (turn N of THREAD)", unless the prompt is one of:

- "hang": the turn runs until it is interrupted;
- "approve": the agent asks to run a command and replies with the decision
  it was given;
- "call a tool": the agent sends a request nobody should answer and replies
  with the error code it got;
- "fail": the turn fails with the model's error;
- "crash": the agent writes a last word on stderr and exits.

It writes what it was asked to $EVENTS, one line each, and keeps the ids of
its threads in $EVENTS.threads so that a new process resumes them.
"""

import json
import os
import sys
import threading
import uuid

EVENTS = os.environ["EVENTS"]
THREADS = EVENTS + ".threads"
out_lock = threading.Lock()
answers = {}
answered = threading.Condition()
interrupts = {}
turn_counts = {}
initialized = False


def event(line):
    with open(EVENTS, "a") as f:
        f.write(line + "\n")


def send(message):
    with out_lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def known_threads():
    try:
        with open(THREADS) as f:
            return set(f.read().split())
    except FileNotFoundError:
        return set()


def ask(method, params):
    request_id = "srv-" + uuid.uuid4().hex[:8]
    send({"method": method, "id": request_id, "params": params})
    with answered:
        answered.wait_for(lambda: request_id in answers, timeout=60)
        return answers.pop(request_id, None)


def notify(method, params):
    send({"method": method, "params": params})


def run_turn(thread, turn, prompt):
    def item(kind, **fields):
        return {"type": kind, "id": uuid.uuid4().hex, **fields}

    def completed(status, error=None):
        notify(
            "turn/completed",
            {"threadId": thread, "turn": {"id": turn, "status": status, "items": [], "error": error}},
        )

    notify("turn/started", {"threadId": thread, "turn": {"id": turn, "status": "inProgress", "items": []}})
    if prompt == "hang":
        command = item("commandExecution", command="sleep 1000", cwd=os.getcwd(), status="inProgress")
        notify("item/started", {"threadId": thread, "turnId": turn, "item": command})
        interrupts[turn].wait(120)
        event(f"interrupted {turn}")
        completed("interrupted")
        return
    if prompt == "fail":
        notify(
            "error",
            {"threadId": thread, "turnId": turn, "willRetry": False, "error": {"message": "quota exceeded"}},
        )
        completed("failed", {"message": "quota exceeded"})
        return
    if prompt == "crash":
        sys.stderr.write("fatal: the agent lost its model\n")
        sys.stderr.flush()
        os._exit(3)
    if prompt == "approve":
        answer = ask(
            "item/commandExecution/requestApproval",
            {"threadId": thread, "turnId": turn, "itemId": "c1", "command": "rm -rf build", "cwd": os.getcwd()},
        )
        text = "approval: " + json.dumps(answer)
    elif prompt == "call a tool":
        answer = ask("item/tool/call", {"threadId": thread, "turnId": turn, "callId": "x", "tool": "t", "arguments": {}})
        text = "tool call: " + json.dumps(answer)
    else:
        turn_counts[thread] = turn_counts.get(thread, 0) + 1
        text = f"echo: {prompt} (turn {turn_counts[thread]} of {thread})"
    message = item("agentMessage", text="")
    notify("item/started", {"threadId": thread, "turnId": turn, "item": message})
    notify("item/agentMessage/delta", {"threadId": thread, "turnId": turn, "itemId": message["id"], "delta": text})
    message["text"] = text
    notify("item/completed", {"threadId": thread, "turnId": turn, "item": message, "completedAtMs": 0})
    completed("completed")


def handle(message):
    global initialized
    method = message.get("method")
    request_id = message.get("id")
    params = message.get("params") or {}
    if method is None:
        with answered:
            answers[request_id] = message.get("result", message.get("error"))
            answered.notify_all()
        return
    event(method if method != "turn/start" else f"turn/start {params['input'][0]['text']}")
    if request_id is None:
        if method == "initialized":
            initialized = True
        return

    def reply(result):
        send({"id": request_id, "result": result})

    def refuse(text):
        send({"id": request_id, "error": {"code": -32600, "message": text}})

    if method == "initialize":
        reply({"userAgent": "fake", "codexHome": os.getcwd(), "platformFamily": "unix", "platformOs": "linux"})
    elif not initialized:
        refuse("Not initialized")
    elif method == "thread/start":
        thread = str(uuid.uuid4())
        with open(THREADS, "a") as f:
            f.write(thread + "\n")
        event(f"thread/start cwd={params.get('cwd')} sandbox={params.get('sandbox')}")
        reply({"thread": {"id": thread, "preview": "", "turns": []}})
    elif method == "thread/resume":
        if params.get("threadId") in known_threads():
            reply({"thread": {"id": params["threadId"], "turns": []}})
        else:
            refuse("thread not found")
    elif method == "turn/start":
        thread = params["threadId"]
        if thread not in known_threads():
            refuse("thread not found")
            return
        turn = str(uuid.uuid4())
        interrupts[turn] = threading.Event()
        reply({"turn": {"id": turn, "status": "inProgress", "items": [], "error": None}})
        threading.Thread(target=run_turn, args=(thread, turn, params["input"][0]["text"]), daemon=True).start()
    elif method == "turn/interrupt":
        interrupts[params["turnId"]].set()
        reply({})
    else:
        refuse(f"unknown method {method}")


def main():
    event("started")
    for line in sys.stdin:
        if line.strip():
            handle(json.loads(line))


main()
