"""ember.init_process_group: torch.distributed (gloo) bootstrapped through emberd's store,
with no MASTER_ADDR / MASTER_PORT, the ranks from the launcher's variables."""

import os
import subprocess
import textwrap
import unittest

import ember_testing as et

RANK = textwrap.dedent("""
    import torch, torch.distributed as dist, ember
    store = ember.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    dist.barrier()
    print(f"rank={dist.get_rank()} world={dist.get_world_size()} sum={t.item():g}", flush=True)
    dist.destroy_process_group()
""")


class DistributedTest(unittest.TestCase):
    def test_gloo_all_reduce_through_the_daemon_store(self):
        with et.Daemon() as daemon:
            children = []
            for rank in range(2):
                env = {k: v for k, v in os.environ.items()
                       if k not in ("MASTER_ADDR", "MASTER_PORT")}
                env.update(EMBER_SOCKET=daemon.socket, EMBER_RANK=str(rank),
                           EMBER_WORLD_SIZE="2", EMBER_JOB="ddp", GLOO_SOCKET_IFNAME="lo")
                children.append(subprocess.Popen([et.python(), "-c", RANK], env=env,
                                                 stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, text=True))
            for rank, child in enumerate(children):
                out, err = child.communicate(timeout=120)
                self.assertEqual(child.returncode, 0, err)
                self.assertIn(f"rank={rank} world=2 sum=3", out)


if __name__ == "__main__":
    unittest.main()
