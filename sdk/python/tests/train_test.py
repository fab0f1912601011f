"""ember.train against a real emberd: run with 2 workers (gloo, DDP through the daemon's
store), a worker SIGKILLed mid-epoch with max_failures=1 (the group resumes from the
latest checkpoint and every sample of each epoch reaches the final model once), a loop that
raises (its traceback in TrainingFailed, no hang), atomic checkpoints kept to the last K,
run under a launcher (the loop runs in the launcher's processes only), two nodes' run()s
(two emberds over mutual TLS), the progress line and GPU idle accounting, and the
Fashion-MNIST example on ember.train."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import torch
import torch.distributed as dist

import ember
import ember.train as train
import ember_testing as et

SAMPLES = 240
BATCH = 10  # per rank: 12 steps an epoch with 2 workers


def counting_loop(config):
    """A model that remembers which samples it saw: counts[i] += 1 for every sample of every
    rank's batch (summed over ranks each step, as gradients are), checkpointed with the
    loader's state every 3 steps. Also a real DDP step on a linear model. Rank
    config["kill_rank"] SIGKILLs itself at step config["kill_step"] of the first attempt."""
    torch.set_num_threads(1)
    model = train.prepare(torch.nn.Linear(28 * 28, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = train.loader("train", BATCH, sample_ids=True, epochs=config["epochs"])
    state = train.get_checkpoint()
    counts = torch.zeros(SAMPLES, dtype=torch.int64)
    step = 0
    if state is not None:
        counts = state["counts"]
        model.module.load_state_dict(state["model"])
        step = state["step"]
    context = train.get_context()
    first = loader.state_dict()["epoch"]
    for epoch in range(first, config["epochs"]):
        for batch in loader:
            x = batch["image"].float().reshape(-1, 28 * 28) / 255
            loss = torch.nn.functional.cross_entropy(model(x), batch["label"].long().reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen = torch.zeros(SAMPLES, dtype=torch.int64)
            seen[batch["sample_id"].reshape(-1).long()] += 1
            dist.all_reduce(seen)
            counts += seen
            step += 1
            if (context.attempt == 0 and context.rank == config.get("kill_rank", -1) and
                    step == config["kill_step"]):
                os.kill(os.getpid(), signal.SIGKILL)
            checkpoint = None
            if step % 3 == 0:
                checkpoint = {"counts": counts.clone(), "model": model.module.state_dict(),
                              "step": step}
            train.report({"epoch": epoch, "loss": round(loss.item(), 4)}, checkpoint=checkpoint)
    return {"counts": counts.tolist(), "steps": step, "world": dist.get_world_size()}


def raising_loop(config):
    train.prepare(torch.nn.Linear(4, 2))
    if train.get_context().rank == 1:
        raise ValueError("boom at rank 1")
    dist.barrier()  # rank 0 waits for rank 1, which is gone: run must not hang here


def cuda_loop(config):
    model = train.prepare(torch.nn.Linear(28 * 28, 10), device="cuda:0")
    for batch in train.loader("train", BATCH, epochs=1):
        model(batch["image"].float().reshape(-1, 28 * 28).cuda()).sum().backward()


class TrainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = et.Daemon(slots=4)
        cls.daemon.add_synthetic("synth-train", SAMPLES)
        os.environ["EMBER_SOCKET"] = cls.daemon.socket
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                     "EMBER_RANK", "EMBER_WORLD_SIZE", "EMBER_JOB"):
            os.environ.pop(name, None)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def test_two_workers_train_report_and_checkpoint(self):
        with tempfile.TemporaryDirectory() as directory:
            result = train.run(counting_loop, workers=2, config={"epochs": 1},
                               datasets={"train": "synth-train"}, checkpoint_dir=directory,
                               keep_checkpoints=2, job="train-two", timeout=120)
            self.assertEqual(result.restarts, 0)
            self.assertEqual(result.value["world"], 2)
            self.assertEqual(result.value["steps"], SAMPLES // (2 * BATCH))
            self.assertEqual(set(result.value["counts"]), {1})  # every sample once
            self.assertEqual(result.metrics["step"], 12)
            self.assertEqual(result.metrics["epoch"], 0)
            self.assertIn("loss", result.metrics)
            self.assertEqual(len(result.workers), 2)
            # Reported every 3 steps, the last 2 kept, whole.
            kept = sorted(f for f in os.listdir(directory) if f.startswith("checkpoint-"))
            self.assertEqual(kept, ["checkpoint-00000009.pt", "checkpoint-00000012.pt"])
            self.assertEqual(result.checkpoint, os.path.join(directory, kept[-1]))
            saved = train.load_checkpoint(result.checkpoint)
            self.assertEqual(saved["step"], 12)
            with open(os.path.join(directory, "metrics.jsonl")) as f:
                lines = [json.loads(line) for line in f]
            self.assertEqual([line["step"] for line in lines], list(range(1, 13)))
            self.assertEqual(lines[-1]["checkpoint"], result.checkpoint)

    def test_a_killed_worker_resumes_from_the_checkpoint_and_no_sample_is_lost_or_doubled(self):
        with tempfile.TemporaryDirectory() as directory:
            # Killed at step 8 of 24 (epoch 0): the group resumes at the checkpoint of step 6.
            result = train.run(counting_loop, workers=2,
                               config={"epochs": 2, "kill_rank": 1, "kill_step": 8},
                               datasets={"train": "synth-train"}, checkpoint_dir=directory,
                               max_failures=1, job="train-kill", timeout=180)
            self.assertEqual(result.restarts, 1)
            self.assertEqual(set(result.value["counts"]), {2})  # once in each of 2 epochs
            self.assertEqual(result.value["steps"], 24)
            self.assertEqual(result.metrics["step"], 24)
            self.assertTrue(result.checkpoint.endswith("checkpoint-00000024.pt"))

    def test_a_loop_that_raises_gives_its_traceback_not_a_hang(self):
        with self.assertRaises(train.TrainingFailed) as raised:
            train.run(raising_loop, workers=2, job="train-raise", timeout=120)
        self.assertIn("ValueError: boom at rank 1", raised.exception.error)
        self.assertIn("worker 1 raised", str(raised.exception))
        self.assertEqual(raised.exception.result.restarts, 0)

    def test_checkpoints_are_whole_or_absent(self):
        with tempfile.TemporaryDirectory() as directory:
            # A write killed midway leaves a temporary file, which is not a checkpoint.
            with open(os.path.join(directory, "checkpoint-00000007.pt.tmp-123"), "wb") as f:
                f.write(b"half a checkpo")
            self.assertIsNone(train.latest_checkpoint(directory))
            torch.save({"checkpoint": {"w": 1}, "step": 5, "loaders": {}},
                       os.path.join(directory, "checkpoint-00000005.pt"))
            self.assertEqual(train.latest_checkpoint(directory),
                             os.path.join(directory, "checkpoint-00000005.pt"))
            self.assertEqual(train.load_checkpoint(train.latest_checkpoint(directory)), {"w": 1})
            with self.assertRaises(ember.FailedPrecondition):
                train.report({"x": 1})  # outside a train_loop

    def test_under_a_launcher_run_uses_its_processes(self):
        script = textwrap.dedent("""
            import os, torch, torch.distributed as dist
            import ember.train as train

            def loop(config):
                train.prepare(torch.nn.Linear(2, 2))
                t = torch.tensor([1.0])
                dist.all_reduce(t)
                return (os.getpid(), train.get_context().rank, t.item())

            result = train.run(loop, workers=8)
            print("result", os.getpid(), result.value[0], result.value[1], result.value[2],
                  flush=True)
        """)
        # ember-run's variables, and torchrun's (as torchrun sets them for its workers).
        launchers = {
            "ember-run": lambda rank: dict(EMBER_RANK=str(rank), EMBER_WORLD_SIZE="2",
                                           EMBER_LOCAL_RANK=str(rank), EMBER_JOB="launched"),
            "torchrun": lambda rank: dict(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                                          LOCAL_WORLD_SIZE="2", GROUP_RANK="0",
                                          TORCHELASTIC_RUN_ID="launched-torchrun",
                                          TORCHELASTIC_RESTART_COUNT="0"),
        }
        for launcher, variables in launchers.items():
            with self.subTest(launcher=launcher):
                children = []
                for rank in range(2):
                    env = dict(os.environ, **variables(rank))
                    children.append(subprocess.Popen(
                        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True))
                for rank, child in enumerate(children):
                    out, err = child.communicate(timeout=120)
                    self.assertEqual(child.returncode, 0, err)
                    words = [line for line in out.splitlines()
                             if line.startswith("result")][0].split()
                    self.assertEqual(words[1], words[2])  # the loop ran in the launched process
                    self.assertEqual((int(words[3]), float(words[4])), (rank, 2.0))


NODE_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import ember.train as train
from train_test import counting_loop
result = train.run(counting_loop, workers=1, nodes=2, node_rank={node}, coordinator={coordinator!r},
                   job="train-nodes", config={config!r}, datasets={{"train": "synth-train"}},
                   checkpoint_dir={directory!r}, max_failures=1, timeout=240)
print("result", json.dumps({{"restarts": result.restarts, "value": result.value,
                            "ranks": [w.rank for w in result.workers]}}), flush=True)
"""


class TwoNodesTest(unittest.TestCase):
    def test_each_node_runs_its_workers_and_a_kill_on_one_restarts_both(self):
        """Two emberds as two nodes (mutual TLS on loopback), run() on each with nodes=2:
        rank 1 (node 1) SIGKILLs itself at step 8 of 24; both nodes restart from the shared
        checkpoint and every sample is still seen once per epoch."""
        with et.Nodes(2) as nodes, tempfile.TemporaryDirectory() as directory:
            for daemon in nodes.daemons:
                daemon.add_synthetic("synth-train", SAMPLES)
            config = {"epochs": 2, "kill_rank": 1, "kill_step": 8}
            children = []
            for node, daemon in enumerate(nodes.daemons):
                script = NODE_SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__)),
                                            node=node, coordinator=nodes.coordinator,
                                            config=config, directory=directory)
                env = dict(os.environ, EMBER_SOCKET=daemon.socket, GLOO_SOCKET_IFNAME="lo")
                children.append(subprocess.Popen([sys.executable, "-c", script], env=env,
                                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                 text=True))
            results = []
            for child in children:
                out, err = child.communicate(timeout=300)
                self.assertEqual(child.returncode, 0, err)
                line = [l for l in out.splitlines() if l.startswith("result ")][0]
                results.append(json.loads(line[len("result "):]))
            self.assertEqual([r["ranks"] for r in results], [[0], [1]])
            self.assertEqual([r["restarts"] for r in results], [1, 1])
            value = results[0]["value"]
            self.assertEqual(value["world"], 2)
            self.assertEqual(value["steps"], 24)
            self.assertEqual(set(value["counts"]), {2})  # once in each of 2 epochs
            self.assertIsNone(results[1]["value"])  # rank 0's value is node 0's
            self.assertIn("node1", nodes.daemons[0].log())  # rank 1 joined from node 1

    def test_node_arguments_are_checked(self):
        cases = [
            (dict(nodes=0), "nodes must be >= 1"),
            (dict(nodes=2, node_rank=2, job="j", coordinator="h:1"), "node_rank 2 is not in 0..1"),
            (dict(nodes=2, node_rank=0, coordinator="h:1"), "job is required with nodes=2"),
            (dict(nodes=2, node_rank=0, job="j", coordinator="nohost"), "is not HOST:PORT"),
            (dict(nodes=1, node_rank=1), "node_rank 1 is not in 0..0"),
        ]
        for kwargs, message in cases:
            with self.subTest(**kwargs), self.assertRaises(ember.InvalidArgument) as raised:
                train.run(raising_loop, workers=1, **kwargs)
            self.assertIn(message, str(raised.exception))


FASHION_MNIST = "/usr/share/datasets/fashion-mnist"  # tools/install-deps puts it there


class ExampleTest(unittest.TestCase):
    def test_the_example_trains_on_fashion_mnist_with_two_workers(self):
        """sdk/examples/python/train_fmnist_ember_train.py, 2 workers, one epoch of
        Fashion-MNIST's test split (79 steps of 2 x 64), checkpointing: it learns."""
        self.assertTrue(os.path.exists(os.path.join(FASHION_MNIST, "t10k-images-idx3-ubyte.gz")),
                        f"no Fashion-MNIST in {FASHION_MNIST}: run ./tools/test "
                        f"(tools/install-deps installs it)")
        example = et.runfile("sdk/examples/python/train_fmnist_ember_train.py")
        with et.Daemon(slots=4) as daemon, tempfile.TemporaryDirectory() as directory:
            daemon.client().add_dataset("fmnist-test", FASHION_MNIST, split="test")
            env = dict(os.environ, EMBER_SOCKET=daemon.socket, GLOO_SOCKET_IFNAME="lo")
            done = subprocess.run(
                [sys.executable, example, "--workers", "2", "--dataset", "fmnist-test",
                 "--test-dataset", "fmnist-test", "--epochs", "1", "--checkpoint", directory],
                env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr)
            found = re.search(r"result: test_accuracy=([0-9.]+) train_seconds=[0-9.]+ ranks=2",
                              done.stdout)
            self.assertIsNotNone(found, done.stdout)
            self.assertGreater(float(found.group(1)), 0.6)  # chance is 0.1
            self.assertEqual(train.latest_checkpoint(directory),
                             os.path.join(directory, "checkpoint-00000001.pt"))


class ProgressLineTest(unittest.TestCase):
    def test_on_a_terminal_report_shows_epoch_step_samples_per_second_stall_and_eta(self):
        class FakeLoader:
            batch_size, world_size, batches = 8, 2, 0

            def stats(self):
                return {"batches": self.batches, "data_stall_seconds": 1.5}

            def __len__(self):
                return 10

        class Terminal(list):
            def isatty(self):
                return True

            def write(self, text):
                self.append(text)

            def flush(self):
                pass

        loader = FakeLoader()
        session = train._Session(
            context=train.Context(0, 2, 0, "j", 0, "gloo"), config={"epochs": 2}, datasets={},
            seed=0, checkpoint_dir=None, checkpoint_every=None, keep=3, metrics_path=None,
            resume=None, channel=None)
        session.loaders["train"] = loader
        terminal, saved = Terminal(), (train._session, sys.stdout)
        train._session, sys.stdout = session, terminal
        try:
            session.last_report = (time.monotonic() - 2.0, 0, 0)  # 2 s ago, nothing yet
            loader.batches = 4  # 4 batches of 8 on each of 2 ranks in 2 s: 32 samples/s
            train.report({"epoch": 0})
        finally:
            train._session, sys.stdout = saved
        line = terminal[-1]
        self.assertTrue(line.startswith("\repoch 0 step 1 (4/10 batches)"), line)
        self.assertRegex(line, r" 3[12] samples/s  data stall 1.5 s  ETA 8 s")


class _FakeEvent:
    """A CUDA event's timing on a scripted GPU clock: records the `clock` value the GPU
    reaches it at."""

    def __init__(self, gpu):
        self.gpu = gpu
        self.at = None

    def record(self):
        self.at = self.gpu.reach()

    def query(self):
        return self.at <= self.gpu.now

    def synchronize(self):
        self.gpu.now = max(self.gpu.now, self.at)

    def elapsed_time(self, later):
        return (later.at - self.at) * 1000.0  # milliseconds


class _FakeGpu:
    """now: the GPU's clock; busy_until: when the work queued so far ends; host: the CPU's
    clock. An event recorded completes at max(host, busy_until)."""

    def __init__(self):
        self.now = 0.0
        self.busy_until = 0.0
        self.host = 0.0

    def reach(self):
        return max(self.host, self.busy_until)


class GpuIdleMeterTest(unittest.TestCase):
    def test_counts_only_the_gpu_time_without_work_during_waits(self):
        gpu = _FakeGpu()
        meter = train._GpuIdleMeter(lambda: _FakeEvent(gpu))
        # Wait 1: the GPU is busy until t=5; the wait runs t=1..3: no idle time.
        gpu.host, gpu.busy_until = 1.0, 5.0
        meter.begin()
        gpu.host = 3.0
        meter.end()
        gpu.busy_until = 8.0  # the next step's work, queued at once
        # Wait 2: the GPU finishes at t=8; the wait runs t=6..10: 2 seconds idle.
        gpu.host = 6.0
        meter.begin()
        gpu.host = 10.0
        meter.end()
        self.assertEqual(meter.seconds(wait=False), 0.0)  # the GPU has reached neither end
        gpu.now = 5.0
        self.assertEqual(meter.seconds(wait=False), 0.0)  # wait 1 reached, nothing idle
        self.assertAlmostEqual(meter.seconds(), 2.0)     # waits for wait 2's end

    def test_a_loader_wait_is_bracketed(self):
        calls = []

        class Meter:
            def begin(self):
                calls.append("begin")

            def end(self):
                calls.append("end")

        class Native:
            def next(self, *args):
                calls.append("next")
                return None

        epoch = ember._loader._Epoch(Native(), wait_meter=Meter())
        self.assertEqual(list(epoch), [])
        self.assertEqual(calls, ["begin", "next", "end"])

    @unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
    def test_on_cuda_workers_report_gpu_idle(self):
        with et.Daemon(slots=4) as daemon:
            daemon.add_synthetic("synth-train", SAMPLES)
            os.environ["EMBER_SOCKET"] = daemon.socket
            os.environ["GLOO_SOCKET_IFNAME"] = "lo"
            result = train.run(cuda_loop, workers=1, datasets={"train": "synth-train"},
                               job="train-gpu", timeout=120)
        idle = result.workers[0].gpu_idle_seconds
        self.assertIsNotNone(idle)
        self.assertGreaterEqual(idle, 0.0)
        self.assertLessEqual(idle, result.workers[0].seconds)


if __name__ == "__main__":
    unittest.main()
