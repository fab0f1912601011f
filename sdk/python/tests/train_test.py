"""ember.train against a real emberd: run with 2 workers (gloo, DDP through the daemon's
store), a worker SIGKILLed mid-epoch with max_failures=1 (the group resumes from the
latest checkpoint and every sample of each epoch reaches the final model once), a loop that
raises (its traceback in TrainingFailed, no hang), atomic checkpoints kept to the last K,
and run under a launcher (the loop runs in the launcher's processes only)."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
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


if __name__ == "__main__":
    unittest.main()
