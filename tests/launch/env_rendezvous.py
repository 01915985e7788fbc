# What torch.distributed's "env://" rendezvous does, without torch (run by tests/launch/cli_test.cc
# under `cohort run -n 2`): rank 0 serves on MASTER_ADDR:MASTER_PORT (as PyTorch's TCPStore
# does; the bind fails if the port is taken, e.g. by the cohort store), every other rank connects
# and sends its rank, and rank 0 prints the sum. Each rank reads only torchrun's variables.
import os
import socket
import time

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
addr = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
if rank == 0:
    server = socket.create_server(addr)
    total = 0
    for _ in range(world - 1):
        conn, _ = server.accept()
        total += int(conn.recv(16).decode())
        conn.close()
    print(f"sum of ranks {total} over {world} at {addr[0]}", flush=True)
else:
    for attempt in range(200):  # rank 0 may not listen yet
        try:
            with socket.create_connection(addr, timeout=5) as conn:
                conn.sendall(str(rank).encode())
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    print(f"rank {rank} of {world} reached rank 0", flush=True)
