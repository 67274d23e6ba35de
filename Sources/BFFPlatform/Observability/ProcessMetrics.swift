import Foundation
import Metrics
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The process metrics every Prometheus client exports, under their usual names, read from
/// `/proc/self` as apple/swift-system-metrics does (that package is not among ours): CPU time,
/// resident and virtual memory, open and allowed file descriptors, and the start time. Sampled
/// at each scrape and by `HealthSampler`; off Linux nothing is recorded.
package enum ProcessMetrics {
    private static let cpu = FloatingPointCounter(label: "process_cpu_seconds_total")
    private static let lastCPU = Mutex<Double>(0)

    package static func sample() {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let fields = fieldsAfterName(stat), fields.count > 21
        else { return }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        // Fields 14, 15 (utime, stime), 22 (starttime), 23 (vsize), 24 (rss) of proc(5); `fields`
        // starts at field 3.
        if let user = Double(fields[11]), let system = Double(fields[12]), ticks > 0 {
            let total = (user + system) / ticks
            let delta = lastCPU.withLock { last in
                defer { last = max(last, total) }
                return total - last
            }
            if delta > 0 { cpu.increment(by: delta) }
        }
        if let virtual = Double(fields[20]) { Gauge(label: "process_virtual_memory_bytes").record(virtual) }
        if let resident = Double(fields[21]) { Gauge(label: "process_resident_memory_bytes").record(resident * page) }
        if let open = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            Gauge(label: "process_open_fds").record(open.count)
        }
        recordConstants(startTicks: Double(fields[19]), ticks: ticks)
    }

    /// The start time and the descriptor limit: unchanging, but recorded with each sample, which
    /// costs less than remembering whether they were.
    private static func recordConstants(startTicks: Double?, ticks: Double) {
        if let startTicks, ticks > 0, let boot = bootTime() {
            Gauge(label: "process_start_time_seconds").record(boot + startTicks / ticks)
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            Gauge(label: "process_max_fds").record(Double(limit.rlim_cur))
        }
    }

    /// Seconds since the epoch at boot: `btime` of /proc/stat.
    private static func bootTime() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// The fields after the command name, which is in parentheses and may itself hold spaces and
    /// parentheses: everything after the last `)`.
    static func fieldsAfterName(_ stat: String) -> [Substring]? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }
}
