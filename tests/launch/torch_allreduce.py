# A torchrun-style PyTorch program, run by tests/launch/cli_test.cc under `cohort run -n 2`:
# init_process_group("gloo") reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the
# environment (init_method "env://"), exactly as under torchrun.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.tensor([float(rank)])
dist.all_reduce(t)  # sum over ranks: 0 + 1
print(f"allreduce {t.item()} at rank {rank} of {dist.get_world_size()}", flush=True)
dist.destroy_process_group()
