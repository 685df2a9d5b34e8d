"""`assign-add explore`: the view data on hand-checked prompts, the memory bound, and the page in a
real headless Chromium on the released checkpoints (slider 5,301 → 5,401 across the binding spike)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from assign_add.explore.server import Explorer, ModelCache, create_app
from assign_add.answers import predict
from assign_add.run import RunError
from assign_add.task.vocab import TextFormError, parse_text, tokens_to_text

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_model_cache_keeps_at_most_its_size(released_run):
    cache = ModelCache(released_run, size=2)
    with cache.use(5301) as a:
        pass
    with cache.use(5401):
        pass
    with cache.use(5301) as again:
        assert again is a, "a cached checkpoint is not reloaded"
    with cache.use(40000):  # evicts 5401, the least recently used
        pass
    assert len(cache) == 2 and cache.steps() == [5301, 40000] and cache.loads == 3


def test_api_answers_like_predict_and_errors_in_one_line(released_run):
    client = create_app(Explorer(released_run, cache_size=4)).test_client()
    meta = client.get("/api/meta").get_json()
    assert meta["steps"] == released_run.checkpoint_steps() and meta["final"] == 40000
    prompt = "c=1, b=17, a=42, b+19="
    view = client.get("/api/view", query_string={"prompt": prompt, "step": 5401}).get_json()
    expected = next(predict(released_run.load_model(5401), [(1, prompt)]))
    assert (view["answer"], view["expected"], view["correct"]) == (expected.answer, 36, expected.answer == 36)
    assert view["tokens"][-4:] == ["+", "b", "19", "="]  # the paper's layout puts the + first
    b_value = [i for i, t in enumerate(view["tokens"]) if t == "b"][0] + 1
    assert view["routing"]["bound"] == [b_value], "the value bound to the variable operand is marked"
    for layer in view["patterns"]:
        rows = np.asarray(layer)
        assert rows.shape == (16, 16) and np.allclose(rows.sum(1), 1, atol=1e-3) and np.allclose(np.triu(rows, 1), 0)
    assert "fourier" not in view, "the Fourier view is for the final model"
    final = client.get("/api/view", query_string={"prompt": prompt, "step": 40000}).get_json()
    assert len(final["fourier"]["spectrum"]) == 29 and final["fourier"]["active"] > 0
    bad = client.get("/api/view", query_string={"prompt": "c=1, b+19=", "step": 5401})
    with pytest.raises(TextFormError) as exc:
        parse_text("c=1, b+19=", released_run.vocab())
    assert bad.status_code == 400 and bad.get_json()["error"] == " ".join(str(exc.value).split())
    missing = client.get("/api/view", query_string={"prompt": prompt, "step": 5400})
    assert missing.status_code == 400 and "nearest: 5401" in missing.get_json()["error"]
    assert client.get("/api/view", query_string={"prompt": prompt, "step": "x"}).status_code == 400


def _wrong_at(run, step: int, count: int) -> list[str]:
    """The first ``count`` 1-var held-out prompts of the evaluation set that ``step`` answers wrongly."""
    vocab = run.vocab()
    texts = [tokens_to_text(t, vocab) for t in run.eval_sets()["1var_heldout"].tokens[:400]]
    preds = predict(run.load_model(step), enumerate(texts, 1))
    return [p.prompt for p in preds if p.answer != p.expected][:count]


def start_explorer(run_root, log) -> tuple[subprocess.Popen, str]:
    """``assign-add explore RUN --port 0`` as a subprocess and its address.  Its request log goes to
    the file ``log``: a pipe nobody reads would fill up and block the server after some hundred requests."""
    proc = subprocess.Popen([sys.executable, "-m", "assign_add.cli", "explore", str(run_root), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()  # printed once the socket listens
    url = re.search(r"http://\S+/", line)
    if url is None:
        proc.kill()
        log.seek(0)
        pytest.fail(f"explore did not announce its address: {line!r} {log.read()[-500:]!r}")
    return proc, url.group(0)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def server(released_run, tmp_path):
    with open(tmp_path / "explore.log", "w+") as log:
        t0 = time.perf_counter()
        proc, url = start_explorer(released_run.root, log)
        yield url, time.perf_counter() - t0
        stop(proc)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
@pytest.mark.slow
def test_page_across_the_binding_spike(released_run, server):
    from playwright.sync_api import sync_playwright

    url, _ = server
    prompts = _wrong_at(released_run, 5301, 8)
    assert len(prompts) == 8
    steps = released_run.checkpoint_steps()
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_function("document.body.dataset.ready !== undefined", timeout=60_000)  # first view drawn
        slider, answer = page.locator("#step-slider"), page.locator("#answer")

        def show(prompt: str, step: int) -> tuple[bool, list]:
            page.locator("#prompt").fill(prompt)
            if step != steps[int(slider.input_value())]:
                slider.fill(str(steps.index(step)))
            page.wait_for_function(f"document.getElementById('answer').dataset.step === '{step}' && "
                                   f"document.getElementById('answer').textContent.startsWith({prompt!r})")
            return answer.get_attribute("data-correct") == "true", page.evaluate(
                "document.getElementById('attn1').data[0].z")

        right_after, eq_left = 0, []
        for prompt in prompts:
            before, z_before = show(prompt, 5301)
            assert not before, "the page agrees with predict: wrong at 5,301"
            slider.focus()
            page.keyboard.press("ArrowRight")  # the next checkpoint: 5,401
            page.wait_for_function("document.getElementById('answer').dataset.step === '5401'")
            right_after += answer.get_attribute("data-correct") == "true"
            z_after = page.evaluate("document.getElementById('attn1').data[0].z")
            assert z_after != z_before, "the attention view follows the slider"
            eq_left.append((z_before[-1][13], z_after[-1][13]))
        # 1-var held-out accuracy is 0.59 at 5,301 and 0.955 at 5,401 (assign-add eval): of the prompts
        # wrong before, at most 0.045 / 0.41 ≈ 11 % can still be wrong after, so 6 of 8 is a loose floor
        assert right_after >= 6, f"{right_after} of 8 right at 5,401"
        # layer-1 '=' attention moves onto the left operand at the spike (the spike table's largest jump)
        assert np.mean([a for _, a in eq_left]) > np.mean([b for b, _ in eq_left]) + 0.1
        page.locator("#prompt").fill("c=1, b+19=")
        page.wait_for_function("document.getElementById('error').textContent.length > 0")
        assert "variable 'b' is not assigned" in page.locator("#error").text_content()
        # the accuracy curves (computed from the checkpoints meanwhile) with the chosen step marked
        page.wait_for_function("document.body.dataset.curves === '1'", timeout=300_000)
        traces = page.evaluate("document.getElementById('curves').data.map(t => t.name)")
        assert {"0var_heldout", "1var_heldout", "1var_forbidden"} <= set(traces)
        chosen = page.evaluate("document.getElementById('curves').layout.shapes.slice(-1)[0].x0")
        assert chosen == 5401
        browser.close()
    assert not errors, errors


def test_a_busy_port_is_one_config_error():
    import socket

    from assign_add.config import ConfigError
    from assign_add.explore.server import check_listen

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            check_listen("127.0.0.1", port)


def test_model_cache_loads_once_and_never_evicts_a_model_in_use(released_run):
    """Threads asking for one uncached step share one load; a model held by a request stays cached."""
    cache = ModelCache(released_run, size=1)
    barrier = threading.Barrier(8)

    def ask(_: int) -> int:
        barrier.wait()
        with cache.use(5401) as model:
            return id(model)

    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(ask, range(8)))
    assert len(ids) == 1 and cache.loads == 1, "eight simultaneous requests, one load"
    with cache.use(5401) as held:
        with cache.use(5301):
            assert set(cache.steps()) == {5301, 5401}, "over its size while both are in use"
        assert cache.steps() == [5401], "the idle model went, the one in use stayed"
    with cache.use(5401) as again:
        assert again is held and cache.loads == 2
    with pytest.raises(RunError, match="no checkpoint at step 7"):
        with cache.use(7):
            pass
    assert cache.steps() == [5401], "a failed load leaves nothing behind"


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {"body": exc.read().decode(errors="replace")[:300]}


def _view_url(base: str, prompt: str, step: int) -> str:
    return f"{base}api/view?" + urllib.parse.urlencode({"prompt": prompt, "step": step})


@pytest.mark.slow
def test_concurrent_requests_through_the_real_server(released_run, server):
    """50 requests at once over 5 checkpoints (the final one with its Fourier view): every one HTTP 200
    and equal to the same request made alone.  Before the per-model lock, 13 of 50 such requests
    failed with HTTP 500 (one request's hooks removed during another's forward)."""
    url, _ = server
    vocab = released_run.vocab()
    prompts = [tokens_to_text(t, vocab) for t in released_run.eval_sets()["1var_heldout"].tokens[:10]]
    steps = [5301, 5401, 14501, 15401, 40000]
    urls = [_view_url(url, p, s) for s in steps for p in prompts]
    barrier = threading.Barrier(len(urls))

    def at_once(u: str) -> tuple[int, dict]:
        barrier.wait()
        return _get(u)

    with ThreadPoolExecutor(len(urls)) as pool:
        together = list(pool.map(at_once, urls))
    failed = [(u, code, body) for u, (code, body) in zip(urls, together) if code != 200]
    assert not failed, f"{len(failed)} of {len(urls)} failed, e.g. {failed[0]}"
    alone = [_get(u) for u in urls]
    assert [body for _, body in together] == [body for _, body in alone]
    assert sum("fourier" in body for _, body in together) == len(prompts)


@pytest.mark.slow
def test_explore_a_run_while_it_trains(tmp_path):
    """The explorer follows a run that ``train`` is writing: new checkpoints and metrics appear
    without a restart, views of the newest checkpoint answer, and the explorer writes nothing."""
    out = tmp_path / "live"
    trainer = subprocess.Popen([sys.executable, "-m", "assign_add.cli", "train", "--preset", "tiny", "--out", str(out),
                                "--no-progress", "train.steps=100000", "train.checkpoint_every=100",
                                "train.eval_every=50", "train.state_every=1000"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    explorer, log = None, open(tmp_path / "explore.log", "w+")
    try:
        deadline = time.time() + 600  # generous: a loaded 2-core machine starts torch slowly
        while not list((out / "checkpoints").glob("step_*.safetensors")):
            assert trainer.poll() is None, f"training exited early: {trainer.stderr.read()[-500:]}"
            assert time.time() < deadline, "no checkpoint after 10 minutes"
            time.sleep(0.1)
        explorer, base = start_explorer(out, log)
        code, first = _get(base + "api/meta")
        assert code == 200 and first["state"] == "running"
        seen_steps, seen_curve = first["steps"], None
        while time.time() < deadline:
            meta, curves = _get(base + "api/meta")[1], _get(base + "api/curves")[1]
            if seen_curve is None and curves.get("steps"):
                seen_curve = curves["steps"][-1]
            if (len(meta["steps"]) >= len(seen_steps) + 2 and seen_curve is not None
                    and curves["steps"][-1] > seen_curve):
                break
            time.sleep(0.5)
        else:
            pytest.fail("the explorer never showed new checkpoints and metrics")
        newest = meta["steps"][-1]
        code, view = _get(_view_url(base, "c=1, b=17, a=42, b+19=", newest))
        assert code == 200 and view["step"] == newest and view["expected"] == 36
        assert "fourier" not in view, "no Fourier fit of a final checkpoint that keeps moving"
        assert trainer.poll() is None, "training went on while explored (the explorer took no lock)"
    finally:
        trainer.send_signal(signal.SIGINT)
        try:
            trainer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            trainer.kill()
            trainer.wait()
        if explorer is not None:
            stop(explorer)
        log.close()
    assert not (out / "evals.jsonl").exists(), "the explorer wrote nothing into the run"
