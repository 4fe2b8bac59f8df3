#include "gpuscout/util/file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "gpuscout/util/error.hpp"

namespace gpuscout {
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot read '{}': {}", path.string(), std::strerror(errno)));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file_atomic(const fs::path& path, std::string_view content) {
  const fs::path directory = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::string temp = (directory / fmt::format(".{}.tmp-XXXXXX", path.filename().string())).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) throw IoError(fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    throw IoError(fmt::format("cannot write '{}' ({}): {}", path.string(), what, std::strerror(err)));
  };
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) fail("chmod");
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw IoError(fmt::format("cannot write '{}' (close): {}", path.string(), std::strerror(err)));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw IoError(fmt::format("cannot write '{}' (rename): {}", path.string(), std::strerror(err)));
  }
}

}  // namespace gpuscout
