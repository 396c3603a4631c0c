#include "oci/container.h"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace sandfence {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::StatusOr<Struct> ParseObject(absl::string_view json,
                                   absl::string_view what) {
  Struct object;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(
      std::string(json), &object, options);
  if (!status.ok()) {
    return Malformed(absl::StrCat(what, " is not a JSON object: ",
                                  std::string(status.message())));
  }
  return object;
}

absl::Status Annotations(const Struct& object, absl::string_view what,
                         std::map<std::string, std::string>* out) {
  auto it = object.fields().find("annotations");
  if (it == object.fields().end() ||
      it->second.kind_case() == Value::kNullValue) {
    return absl::OkStatus();
  }
  if (it->second.kind_case() != Value::kStructValue) {
    return Malformed(absl::StrCat(what, ": \"annotations\" is not an object"));
  }
  for (const auto& [key, value] : it->second.struct_value().fields()) {
    if (value.kind_case() != Value::kStringValue) {
      return Malformed(absl::StrCat(what, ": annotation \"", key,
                                    "\" is not a string"));
    }
    (*out)[key] = value.string_value();
  }
  return absl::OkStatus();
}

std::string ReadFile(const std::string& path, int* err) {
  std::ifstream in(path);
  if (!in) {
    *err = errno;
    return "";
  }
  std::stringstream text;
  text << in.rdbuf();
  *err = 0;
  return text.str();
}

}  // namespace

absl::StatusOr<OciState> ParseOciState(absl::string_view json) {
  absl::StatusOr<Struct> object = ParseObject(json, "the container state");
  if (!object.ok()) return object.status();
  const auto& f = object->fields();
  OciState state;
  auto string_field = [&](const char* name, std::string* out,
                          bool required) -> absl::Status {
    auto it = f.find(name);
    if (it == f.end()) {
      return required ? Malformed(absl::StrCat(
                            "the container state has no \"", name, "\""))
                      : absl::OkStatus();
    }
    if (it->second.kind_case() != Value::kStringValue) {
      return Malformed(absl::StrCat("the container state's \"", name,
                                    "\" is not a string"));
    }
    *out = it->second.string_value();
    return absl::OkStatus();
  };
  if (absl::Status s = string_field("id", &state.id, true); !s.ok()) return s;
  if (state.id.empty()) return Malformed("the container state's \"id\" is empty");
  if (absl::Status s = string_field("status", &state.status, false); !s.ok()) {
    return s;
  }
  if (absl::Status s = string_field("bundle", &state.bundle, false); !s.ok()) {
    return s;
  }
  if (auto it = f.find("pid"); it != f.end()) {
    const double pid = it->second.number_value();
    if (it->second.kind_case() != Value::kNumberValue || pid < 0 ||
        pid != static_cast<double>(static_cast<pid_t>(pid))) {
      return Malformed("the container state's \"pid\" is not a process id");
    }
    state.pid = static_cast<pid_t>(pid);
  }
  if (absl::Status s = Annotations(*object, "the container state",
                                   &state.annotations);
      !s.ok()) {
    return s;
  }
  return state;
}

absl::StatusOr<std::map<std::string, std::string>> BundleAnnotations(
    const std::string& bundle) {
  const std::string path = absl::StrCat(bundle, "/config.json");
  int err = 0;
  const std::string text = ReadFile(path, &err);
  if (err != 0) return ErrnoError(err, absl::StrCat("cannot read ", path));
  absl::StatusOr<Struct> object = ParseObject(text, path);
  if (!object.ok()) return object.status();
  std::map<std::string, std::string> out;
  if (absl::Status s = Annotations(*object, path, &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<ContainerPlacement> PlaceContainer(pid_t pid) {
  if (pid <= 0) {
    return Malformed(
        "the container state has no \"pid\": the hook must run at "
        "createRuntime (or prestart), when the container's process exists");
  }
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  if (!mount.ok()) return mount.status();
  absl::StatusOr<std::string> theirs = CgroupOfPid(pid);
  if (!theirs.ok()) return theirs.status();
  absl::StatusOr<std::string> ours = CgroupOfPid(::getpid());
  if (!ours.ok()) return ours.status();
  if (*theirs == "/" || *theirs == *ours) {
    return Rejected(absl::StrCat(
        "container process ", pid, " has no cgroup v2 directory of its own (",
        *theirs == "/" ? "it is at the hierarchy's root"
                       : "it shares the hook's",
        ", ", *theirs,
        "): enforcing there would govern more than the container. On a "
        "hybrid cgroup host use a runtime that also places containers in "
        "the v2 hierarchy (runc does; crun refuses such hosts)"));
  }
  ContainerPlacement placement;
  placement.cgroup_path = absl::StrCat(*mount, *theirs);
  const std::string netns = absl::StrCat("/proc/", pid, "/ns/net");
  struct stat theirs_ns {}, ours_ns {};
  if (::stat(netns.c_str(), &theirs_ns) != 0) {
    return ErrnoError(errno, absl::StrCat("stat ", netns));
  }
  if (::stat("/proc/self/ns/net", &ours_ns) != 0) {
    return ErrnoError(errno, "stat /proc/self/ns/net");
  }
  placement.own_netns = theirs_ns.st_ino != ours_ns.st_ino ||
                        theirs_ns.st_dev != ours_ns.st_dev;
  if (placement.own_netns) placement.netns_path = netns;
  return placement;
}

}  // namespace sandfence
