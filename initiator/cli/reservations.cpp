// resv-register, resv-acquire, resv-release, resv-report: nvme-cli 2.4's reservation verbs (same option
// letters, meanings, range checks and report layouts) on one namespace named by a URI (common.h
// NamespaceFlags), through our userspace host (initiator/host/shared_volume.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "initiator/cli/cli.h"
#include "initiator/cli/common.h"

namespace rdmablk::initiator {

namespace {

std::string hex16(const std::array<uint8_t, 16>& b) {
  std::string s;
  for (uint8_t x : b) s += fmt::format("{:02x}", x);
  return s;
}

}  // namespace

std::string format_reservation_report(const ReservationStatus& s) {
  std::string out = "\nNVME Reservation status:\n\n";
  out += fmt::format("gen       : {}\n", s.generation);
  out += fmt::format("rtype     : {}\n", s.rtype);
  out += fmt::format("regctl    : {}\n", s.regctl);
  out += fmt::format("ptpls     : {}\n", s.ptpls);
  for (std::size_t i = 0; i < s.registrants.size(); ++i) {
    const Registrant& r = s.registrants[i];
    if (!s.extended) {
      out += fmt::format("regctl[{}] :\n", i);
      out += fmt::format("  cntlid  : {:x}\n", r.cntlid);
      out += fmt::format("  rcsts   : {:x}\n", r.rcsts);
      out += fmt::format("  hostid  : {:x}\n", r.hostid64());
      out += fmt::format("  rkey    : {:x}\n", r.rkey);
    } else {
      out += fmt::format("regctlext[{}] :\n", i);
      out += fmt::format("  cntlid     : {:x}\n", r.cntlid);
      out += fmt::format("  rcsts      : {:x}\n", r.rcsts);
      out += fmt::format("  rkey       : {:x}\n", r.rkey);
      out += fmt::format("  hostid     : {}\n", hex16(r.hostid));
    }
  }
  return out + "\n";
}

std::string format_reservation_report_json(const ReservationStatus& s) {
  nlohmann::ordered_json root;
  root["gen"] = s.generation;
  root["rtype"] = s.rtype;
  root["regctl"] = s.regctl;
  root["ptpls"] = s.ptpls;
  auto regctls = nlohmann::ordered_json::array();
  for (const Registrant& r : s.registrants) {
    nlohmann::ordered_json e;
    e["cntlid"] = r.cntlid;
    e["rcsts"] = r.rcsts;
    if (s.extended) {
      e["rkey"] = r.rkey;
      e["hostid"] = hex16(r.hostid);
    } else {
      e["hostid"] = r.hostid64();
      e["rkey"] = r.rkey;
    }
    regctls.push_back(e);
  }
  root["regctls"] = regctls;
  return root.dump(2) + "\n";
}

namespace cli {

namespace {

namespace p = rdmablk::protocol;

// The fields the four verbs share; each uses its own subset.
struct ResvFlags {
  NamespaceFlags ns;
  uint64_t crkey = 0;
  uint64_t nrkey = 0;  // register
  uint64_t prkey = 0;  // acquire
  unsigned action = 0;  // rrega / racqa / rrela
  unsigned rtype = 0;
  unsigned cptpl = 0;
  bool iekey = false;
  // report
  uint32_t numd = 0;
  bool eds = false;
  std::string format = "normal";
  bool raw_binary = false;
};

// nvme-cli's range checks, its wording.
int check(const CliEnv& env, unsigned value, unsigned max, const char* name) {
  if (value <= max) return 0;
  return report_error(env, fmt::format("invalid {} {} (at most {})", name, value, max), 2);
}

// Register, Acquire and Release: open the namespace, send the command (`send(io, nsid)`), and say so as
// nvme-cli does.
template <typename Send>
int run_command(const ResvFlags& f, const CliEnv& env, const char* name, Send&& send) {
  auto s = open_namespace(f.ns, env, false);
  if (!s) return s.error();
  auto r = send(*s->io, s->nsid);
  if (!r) return report_error(env, r.error().message);
  *env.out << "NVME Reservation " << name << " success\n";
  return 0;
}

int run_register(const ResvFlags& f, const CliEnv& env) {
  if (int e = check(env, f.action, 7, "rrega"); e != 0) return e;
  if (int e = check(env, f.cptpl, 3, "cptpl"); e != 0) return e;
  return run_command(f, env, "Register", [&](auto& io, uint32_t nsid) {
    return reservation_register(io, nsid, static_cast<p::RegisterAction>(f.action), f.iekey,
                                static_cast<p::ChangePtpl>(f.cptpl), f.crkey, f.nrkey);
  });
}

int run_acquire(const ResvFlags& f, const CliEnv& env) {
  if (int e = check(env, f.action, 7, "racqa"); e != 0) return e;
  if (int e = check(env, f.rtype, 6, "rtype"); e != 0) return e;
  return run_command(f, env, "Acquire", [&](auto& io, uint32_t nsid) {
    return reservation_acquire(io, nsid, static_cast<p::AcquireAction>(f.action), f.iekey,
                               static_cast<p::ReservationType>(f.rtype), f.crkey, f.prkey);
  });
}

int run_release(const ResvFlags& f, const CliEnv& env) {
  if (int e = check(env, f.action, 7, "rrela"); e != 0) return e;
  if (int e = check(env, f.rtype, 6, "rtype"); e != 0) return e;
  return run_command(f, env, "Release", [&](auto& io, uint32_t nsid) {
    return reservation_release(io, nsid, static_cast<p::ReleaseAction>(f.action), f.iekey,
                               static_cast<p::ReservationType>(f.rtype), f.crkey);
  });
}

// nvme-cli's sizing: NUMD 0 (or 1024 and more) reads 4 KiB; fewer dwords than the header reads the header.
uint32_t report_bytes(uint32_t numd, bool eds) {
  if (numd == 0 || numd >= 1024) numd = 1023;
  const uint32_t header = eds ? sizeof(p::ReservationStatusExtHeader) : sizeof(p::ReservationStatusHeader);
  return std::max((numd + 1) * 4, header);
}

int run_report(const ResvFlags& f, const CliEnv& env) {
  auto s = open_namespace(f.ns, env, false);
  if (!s) return s.error();
  auto data = reservation_report_data(*s->io, s->nsid, f.eds, report_bytes(f.numd, f.eds));
  if (!data) return report_error(env, data.error().message);
  if (f.raw_binary || f.format == "binary") {
    env.out->write(reinterpret_cast<const char*>(data->data()), static_cast<std::streamsize>(data->size()));
    return 0;
  }
  auto status = parse_reservation_report(*data, f.eds);
  if (!status) return report_error(env, status.error().message);
  *env.out << (f.format == "json" ? format_reservation_report_json(*status) : format_reservation_report(*status));
  if (status->truncated()) {
    *env.err << fmt::format("rdmablk resv-report: note: {} of {} registrants fit in {} bytes (see --numd)\n",
                            status->registrants.size(), status->regctl, data->size());
  }
  return 0;
}

CLI::App* add_verb(CLI::App& app, const char* name, const char* help, ResvFlags& f) {
  auto* sub = app.add_subcommand(name, help);
  add_namespace_flags(sub, f.ns);
  return sub;
}

void add_iekey(CLI::App* sub, ResvFlags& f) { sub->add_flag("-i,--iekey", f.iekey, "ignore existing res. key"); }

}  // namespace

void add_reservation_commands(CLI::App& app, const CliEnv& env, std::vector<Command>& out) {
  auto rf = std::make_shared<ResvFlags>();
  auto* reg =
      add_verb(app, "resv-register", "register, unregister or replace a reservation key (Reservation Register)", *rf);
  reg->add_option("-c,--crkey", rf->crkey, "current reservation key");
  reg->add_option("-k,--nrkey", rf->nrkey, "new reservation key");
  reg->add_option("-r,--rrega", rf->action, "reservation registration action: 0 register, 1 unregister, 2 replace");
  reg->add_option("-p,--cptpl", rf->cptpl, "change persistence through power loss: 0 no change, 2 clear, 3 set");
  add_iekey(reg, *rf);
  out.push_back({reg, [rf, &env] { return run_register(*rf, env); }});

  auto af = std::make_shared<ResvFlags>();
  auto* acq = add_verb(app, "resv-acquire", "acquire or preempt a reservation (Reservation Acquire)", *af);
  acq->add_option("-c,--crkey", af->crkey, "current reservation key");
  acq->add_option("-p,--prkey", af->prkey, "pre-empt reservation key");
  acq->add_option("-t,--rtype", af->rtype,
                  "reservation type: 1 write exclusive, 2 exclusive access, 3/4 ... registrants only, 5/6 ... all "
                  "registrants");
  acq->add_option("-a,--racqa", af->action, "reservation acquire action: 0 acquire, 1 preempt, 2 preempt and abort");
  add_iekey(acq, *af);
  out.push_back({acq, [af, &env] { return run_acquire(*af, env); }});

  auto lf = std::make_shared<ResvFlags>();
  auto* rel = add_verb(app, "resv-release", "release or clear a reservation (Reservation Release)", *lf);
  rel->add_option("-c,--crkey", lf->crkey, "current reservation key");
  rel->add_option("-t,--rtype", lf->rtype, "reservation type (the one held)");
  rel->add_option("-a,--rrela", lf->action, "reservation release action: 0 release, 1 clear");
  add_iekey(rel, *lf);
  out.push_back({rel, [lf, &env] { return run_release(*lf, env); }});

  auto pf = std::make_shared<ResvFlags>();
  auto* rep = add_verb(app, "resv-report", "print the reservation status of a namespace (Reservation Report)", *pf);
  rep->add_option("-d,--numd", pf->numd, "number of dwords to transfer (0-based; default 1023: 4 KiB)");
  rep->add_flag("-e,--eds", pf->eds, "request extended data structure (128-bit host identifiers)");
  rep->add_option("-o,--output-format", pf->format, "normal, json or binary")
      ->check(CLI::IsMember({"normal", "json", "binary"}));
  rep->add_flag("-b,--raw-binary", pf->raw_binary, "dump output in binary format");
  out.push_back({rep, [pf, &env] { return run_report(*pf, env); }});
}

}  // namespace cli

}  // namespace rdmablk::initiator
