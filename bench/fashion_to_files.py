#!/usr/bin/python3
"""Fashion-MNIST (Debian's IDX files) written as a user's own files, for cohort's csv and numpy
data sets (bench/run_file_data_accuracy.sh, docs/data.md):

  DIR/train.csv, DIR/test.csv   a header row "label,p0,...,p783", then one image per row: the
                                label, then 784 pixels 0-255
  DIR/fashion.npz               x [60000, 1, 28, 28] uint8, y [60000] uint8, x_test, y_test
                                (np.savez: stored, so cohort memory-maps it)

    /usr/bin/python3 bench/fashion_to_files.py DIR [--limit N]
"""
import argparse
import gzip
import os

import numpy as np

D = "/usr/share/datasets/fashion-mnist/"


def idx(name, offset):
    with gzip.open(D + name) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def split(name, limit):
    x = idx(f"{name}-images-idx3-ubyte.gz", 16).reshape(-1, 28 * 28)
    y = idx(f"{name}-labels-idx1-ubyte.gz", 8)
    return (x[:limit], y[:limit]) if limit else (x, y)


def write_csv(path, x, y):
    header = "label," + ",".join(f"p{i}" for i in range(x.shape[1]))
    rows = np.column_stack([y, x]).astype(np.int64)
    np.savetxt(path, rows, fmt="%d", delimiter=",", header=header, comments="")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--limit", type=int, default=0, help="first N images of each split (0: all)")
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    (x, y), (tx, ty) = split("train", a.limit), split("t10k", a.limit)
    write_csv(os.path.join(a.dir, "train.csv"), x, y)
    write_csv(os.path.join(a.dir, "test.csv"), tx, ty)
    np.savez(os.path.join(a.dir, "fashion.npz"), x=x.reshape(-1, 1, 28, 28), y=y,
             x_test=tx.reshape(-1, 1, 28, 28), y_test=ty)
    print(f"fashion_to_files: {len(y)} + {len(ty)} images in {a.dir}")


if __name__ == "__main__":
    main()
