#include "cohort/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <filesystem>
#include <set>

#include "cohort/core/error.h"
#include "cohort/data/image_decode.h"

namespace cohort::data {

struct ImageFolderDataset::Data {
  std::string root;
  std::vector<std::string> classes;
  std::vector<std::string> files;  // sorted by (label, path): torchvision's order
  std::vector<int64_t> labels;
};

namespace {

namespace fs = std::filesystem;

// Names starting with '.' are never classes or images: .ipynb_checkpoints and macOS's ._x.jpg
// would otherwise become a class or an undecodable "image".
bool imf_hidden(const fs::path& p) {
  return p.filename().string().starts_with(".");
}

bool imf_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

[[noreturn]] void imf_fs_error(const fs::path& p, const std::error_code& ec) {
  throw IoError(detail::str("image folder: cannot list ", p.string(), ": ", ec.message()));
}

// The entries of one folder, in no order; links are followed by the is_* calls.
std::vector<fs::directory_entry> imf_entries(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::directory_entry> out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!imf_hidden(it->path())) out.push_back(*it);
  }
  if (ec) imf_fs_error(dir, ec);
  return out;
}

bool imf_is_dir(const fs::directory_entry& e) {
  std::error_code ec;
  return e.is_directory(ec);  // false for a dangling link
}

// `dir` and every folder under it (links followed), sorted by path as Python's sorted(os.walk())
// orders them: by the path's bytes, so "a/x" files come before "a-b/" ones only as strings do.
void imf_folders(const fs::path& dir, std::vector<std::string>& out) {
  out.push_back(dir.string());
  for (const fs::directory_entry& e : imf_entries(dir)) {
    if (imf_is_dir(e)) imf_folders(e.path(), out);
  }
}

// The images of one class folder, in torchvision's order: folders by sorted path, each one's
// files by sorted name.
std::vector<std::string> imf_class_images(const fs::path& class_dir) {
  std::vector<std::string> folders, out;
  imf_folders(class_dir, folders);
  std::sort(folders.begin(), folders.end());
  for (const std::string& f : folders) {
    std::vector<std::string> names;
    for (const fs::directory_entry& e : imf_entries(f)) {
      std::error_code ec;
      if (imf_image_name(e.path()) && e.is_regular_file(ec)) names.push_back(e.path().string());
    }
    std::sort(names.begin(), names.end());
    out.insert(out.end(), names.begin(), names.end());
  }
  return out;
}

int64_t imf_count_images(const fs::path& dir) {
  int64_t n = 0;
  for (const fs::directory_entry& e : imf_entries(dir)) n += imf_image_name(e.path());
  return n;
}

// The class folders of the root: its sub-folders (links to folders too), sorted by name.
std::vector<std::string> imf_class_folders(const fs::path& root) {
  std::error_code ec;
  const fs::file_status st = fs::status(root, ec);
  COHORT_CHECK_IO(fs::exists(st), "image folder ", root.string(),
                  " does not exist; expected a folder holding one sub-folder per class");
  COHORT_CHECK_ARG(fs::is_directory(st), "image folder ", root.string(),
                   " is not a folder; expected a folder holding one sub-folder per class");
  std::vector<std::string> names;
  for (const fs::directory_entry& e : imf_entries(root)) {
    if (imf_is_dir(e)) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) {
    const int64_t loose = imf_count_images(root);
    throw InvalidArgument(detail::str(
        "image folder ", root.string(), " has no class folders; expected ", root.string(),
        "/<class>/<image>.png (or .jpg, .jpeg), one sub-folder per class",
        loose > 0 ? detail::str(" (it holds ", loose,
                                " images directly: move them into "
                                "their classes' sub-folders)")
                  : std::string()));
  }
  return names;
}

// Each folder's label: its index in the given class list (an evaluation split), else in the
// sorted folder names.
std::vector<int64_t> imf_labels(const fs::path& root, const std::vector<std::string>& folders,
                                const std::vector<std::string>& classes) {
  std::vector<int64_t> labels;
  for (const std::string& name : folders) {
    const auto it = std::find(classes.begin(), classes.end(), name);
    if (it == classes.end()) {
      std::string known;
      for (const std::string& c : classes) known += (known.empty() ? "" : ", ") + c;
      throw InvalidArgument(detail::str(
          "image folder ", root.string(), ": class folder '", name, "' (", (root / name).string(),
          ") is not a class of the training split, whose classes are: ", known));
    }
    labels.push_back(int64_t(it - classes.begin()));
  }
  return labels;
}

void imf_check_classes(const std::string& root, const std::vector<std::string>& classes) {
  const std::set<std::string> unique(classes.begin(), classes.end());
  COHORT_CHECK_ARG(unique.size() == classes.size(), "image folder ", root,
                   ": the given class list names a class twice");
}

std::shared_ptr<const ImageFolderDataset::Data> imf_scan(const ImageFolderOptions& o) {
  COHORT_CHECK_ARG(!o.path.empty(), "image folder: no path given");
  imf_check_classes(o.path, o.classes);
  const fs::path root(o.path);
  const std::vector<std::string> folders = imf_class_folders(root);
  auto d = std::make_shared<ImageFolderDataset::Data>();
  d->root = o.path;
  d->classes = o.classes.empty() ? folders : o.classes;
  const std::vector<int64_t> labels = imf_labels(root, folders, d->classes);
  // Folders in label order, so that samples sort by (label, path) as torchvision's do.
  std::vector<size_t> order(folders.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return labels[a] < labels[b]; });
  for (size_t i : order) {
    const fs::path dir = root / folders[i];
    std::vector<std::string> images = imf_class_images(dir);
    COHORT_CHECK_ARG(!images.empty(), "image folder ", o.path, ": class folder ", dir.string(),
                     " holds no image (no .png, .jpg or .jpeg file); remove it or add its images");
    d->labels.insert(d->labels.end(), images.size(), labels[i]);
    d->files.insert(d->files.end(), std::make_move_iterator(images.begin()),
                    std::make_move_iterator(images.end()));
  }
  return d;
}

// Sample i's image, with the error naming the data set and the index in front of the file's.
DecodedImage imf_read(const ImageFolderDataset::Data& d, int64_t i) {
  try {
    return read_image(d.files[size_t(i)]);
  } catch (...) {
    rethrow_with_context(std::current_exception(),
                         detail::str("image folder ", d.root, ", sample ", i, ": "));
  }
}

void imf_check_options(const ImageFolderOptions& o) {
  const Standardize& s = o.standardize;
  COHORT_CHECK_ARG(std::isfinite(s.mean) && std::isfinite(s.std) && s.std > 0, "image folder ",
                   o.path, ": standardize needs a finite mean and a finite std > 0, got mean ",
                   s.mean, ", std ", s.std);
  COHORT_CHECK_ARG(o.channels >= 0 && o.channels <= 4, "image folder ", o.path, ": channels ",
                   o.channels,
                   "; expected 1 (gray), 2 (gray, alpha), 3 (RGB), 4 (RGBA) or 0 (from the first "
                   "image)");
  COHORT_CHECK_ARG(o.height >= 0 && o.width >= 0 && (o.height == 0) == (o.width == 0),
                   "image folder ", o.path, ": size ", o.height, " x ", o.width,
                   "; expected a positive height and width, or both 0 (the first image's)");
}

}  // namespace

ImageFolderDataset::ImageFolderDataset(const ImageFolderOptions& options) {
  imf_check_options(options);
  data_ = imf_scan(options);
  int64_t c = options.channels, h = options.height, w = options.width;
  if (c == 0 || h == 0) {  // what the first image says; the others follow it
    const DecodedImage first = imf_read(*data_, 0);
    if (c == 0) c = first.channels <= 2 ? 1 : 3;
    if (h == 0) {
      h = first.height;
      w = first.width;
    }
  }
  sample_shape_ = {c, h, w};
  scale_ = 1.0f / options.standardize.std;
  bias_ = -options.standardize.mean / options.standardize.std;
}

int64_t ImageFolderDataset::size() const {
  return int64_t(data_->files.size());
}
const Shape& ImageFolderDataset::sample_shape() const {
  return sample_shape_;
}
int64_t ImageFolderDataset::num_classes() const {
  return int64_t(data_->classes.size());
}
const std::vector<std::string>& ImageFolderDataset::classes() const {
  return data_->classes;
}
const std::string& ImageFolderDataset::file(int64_t index) const {
  COHORT_CHECK_ARG(index >= 0 && index < size(), "ImageFolderDataset: index ", index,
                   " out of range [0, ", size(), ")");
  return data_->files[size_t(index)];
}
int64_t ImageFolderDataset::label(int64_t index) const {
  COHORT_CHECK_ARG(index >= 0 && index < size(), "ImageFolderDataset: index ", index,
                   " out of range [0, ", size(), ")");
  return data_->labels[size_t(index)];
}
const std::string& ImageFolderDataset::path() const {
  return data_->root;
}

Batch ImageFolderDataset::get_batch(std::span<const int64_t> indices) const {
  const Data& d = *data_;
  check_batch_indices(indices, size(), "ImageFolderDataset");
  const int64_t b = int64_t(indices.size());
  const int64_t c = sample_shape_[0], h = sample_shape_[1], w = sample_shape_[2];
  Batch out{empty({b, c, h, w}, DType::f32), empty({b}, DType::i64)};
  float* x = out.x.data<float>();
  int64_t* y = out.y.data<int64_t>();
  const bool identity = scale_ == 1.0f && bias_ == 0.0f;
  for (int64_t k = 0; k < b; ++k) {
    const int64_t i = indices[size_t(k)];
    const DecodedImage image = convert_channels(imf_read(d, i), int(c));
    float* sample = x + k * c * h * w;
    image_to_chw(image, h, w, sample);
    if (!identity) {
      for (int64_t j = 0; j < c * h * w; ++j) sample[j] = sample[j] * scale_ + bias_;
    }
    y[k] = d.labels[size_t(i)];
  }
  return out;
}

}  // namespace cohort::data
