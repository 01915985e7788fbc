#!/usr/bin/python3
"""Fashion-MNIST (Debian's IDX files) written as a user's own files, for cohort's csv and numpy
data sets (bench/run_file_data_accuracy.sh, docs/data.md):

  DIR/train.csv, DIR/test.csv   a header row "label,p0,...,p783", then one image per row: the
                                label, then 784 pixels 0-255
  DIR/fashion.npz               x [60000, 1, 28, 28] uint8, y [60000] uint8, x_test, y_test
                                (np.savez: stored, so cohort memory-maps it)
  DIR/images/train/<k>_<name>/  with --images: an image folder (data.dataset = "image_folder"),
  DIR/images/test/<k>_<name>/   one sub-folder per class (named "0_t-shirt" ... "9_ankle-boot",
                                so that the sorted names keep Fashion-MNIST's label order), each
                                image upscaled to --image-size (PIL bilinear) and tinted: its
                                grey times a colour drawn per image, so that the three channels
                                differ (RGB PNG, or JPEG with --image-format jpeg)

    /usr/bin/python3 bench/fashion_to_files.py DIR [--limit N]
        [--images [--image-limit N] [--image-size 32] [--image-format png|jpeg] [--images-only]]
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


CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
           "ankle-boot"]


def write_image_folder(root, x, y, size, fmt, seed):
    """x [N, 784] uint8 as root/<k>_<name>/<i>.png: upscaled, tinted RGB. PIL is imported here
    only, so that the CSV and NumPy files need numpy alone."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    tints = rng.uniform(0.35, 1.0, size=(len(y), 3))  # per image: the class is in the shape
    for k, name in enumerate(CLASSES):
        os.makedirs(os.path.join(root, f"{k}_{name}"), exist_ok=True)
    ext = "png" if fmt == "png" else "jpg"
    for i, (img, label) in enumerate(zip(x, y)):
        grey = Image.fromarray(img.reshape(28, 28)).resize((size, size), Image.BILINEAR)
        rgb = np.rint(np.asarray(grey, np.float32)[..., None] * tints[i]).astype(np.uint8)
        path = os.path.join(root, f"{label}_{CLASSES[label]}", f"{i:05d}.{ext}")
        if fmt == "png":
            Image.fromarray(rgb, "RGB").save(path, compress_level=1)
        else:
            Image.fromarray(rgb, "RGB").save(path, quality=95)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--limit", type=int, default=0, help="first N images of each split (0: all)")
    p.add_argument("--images", action="store_true",
                   help="also write DIR/images/{train,test}: an image folder of RGB images")
    p.add_argument("--image-limit", type=int, default=0,
                   help="first N images of each split in the image folder (0: as --limit)")
    p.add_argument("--image-size", type=int, default=32, help="the images' height and width")
    p.add_argument("--image-format", choices=["png", "jpeg"], default="png")
    p.add_argument("--images-only", action="store_true",
                   help="write the image folder only (implies --images)")
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    if not a.images_only:
        (x, y), (tx, ty) = split("train", a.limit), split("t10k", a.limit)
        write_csv(os.path.join(a.dir, "train.csv"), x, y)
        write_csv(os.path.join(a.dir, "test.csv"), tx, ty)
        np.savez(os.path.join(a.dir, "fashion.npz"), x=x.reshape(-1, 1, 28, 28), y=y,
                 x_test=tx.reshape(-1, 1, 28, 28), y_test=ty)
        print(f"fashion_to_files: {len(y)} + {len(ty)} images in {a.dir}")
    if a.images or a.images_only:
        n = a.image_limit or a.limit
        (x, y), (tx, ty) = split("train", n), split("t10k", n)
        root = os.path.join(a.dir, "images")
        write_image_folder(os.path.join(root, "train"), x, y, a.image_size, a.image_format, 1)
        write_image_folder(os.path.join(root, "test"), tx, ty, a.image_size, a.image_format, 2)
        print(f"fashion_to_files: {len(y)} + {len(ty)} {a.image_size}x{a.image_size} RGB "
              f"{a.image_format.upper()} images in {root}/train and {root}/test")


if __name__ == "__main__":
    main()
