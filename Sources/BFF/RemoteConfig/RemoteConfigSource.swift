import BFFPlatform
import Foundation
import Logging
import Metrics
import NIOConcurrencyHelpers

/// `BFF_APP_CONFIG_FILE`, read at start-up (an invalid file stops the start, naming the variable) and
/// again whenever it changes: its modification time and size are looked at no more than once a
/// second, from the request that needs the configuration. A change that does not parse keeps the
/// last good configuration, logs a warning and sets `bff_app_config_valid` to 0 until fixed.
final class RemoteConfigSource: Sendable {
    private struct State {
        var config: RemoteConfig
        var stamp: FileStamp?
        var checked: ContinuousClock.Instant
    }

    private struct FileStamp: Equatable {
        let modified: Date
        let size: Int
    }

    let path: String?
    private let logger: Logger
    private let state: NIOLockedValueBox<State>
    private let valid = Gauge(label: "bff_app_config_valid")

    /// Without a path: no minimum, no maintenance, no features.
    init(path: String?, logger: Logger) throws {
        self.path = path
        self.logger = logger
        guard let path else {
            state = NIOLockedValueBox(State(config: .none, stamp: nil, checked: .now))
            valid.record(1)
            return
        }
        do {
            let (config, stamp) = try Self.load(path)
            state = NIOLockedValueBox(State(config: config, stamp: stamp, checked: .now))
            valid.record(1)
        } catch {
            throw ConfigurationError("BFF_APP_CONFIG_FILE", "cannot be used: \(error)")
        }
    }

    /// The configuration as of now.
    func current() -> RemoteConfig {
        guard let path else { return .none }
        let now = ContinuousClock.now
        let due = state.withLockedValue { state -> FileStamp?? in
            guard now - state.checked >= .seconds(1) else { return .none }
            state.checked = now
            return .some(state.stamp)
        }
        if case .some(let known) = due, Self.stamp(path) != known {
            reload(path)
        }
        return state.withLockedValue { $0.config }
    }

    private func reload(_ path: String) {
        do {
            let (config, stamp) = try Self.load(path)
            state.withLockedValue { state in
                state.config = config
                state.stamp = stamp
            }
            valid.record(1)
            logger.notice("app configuration reloaded", metadata: ["file": .string(path)])
        } catch {
            // Remember the bad file's stamp: it is reported once, not on every check.
            state.withLockedValue { $0.stamp = Self.stamp(path) }
            valid.record(0)
            logger.warning(
                "app configuration file is invalid; the last good configuration stays", metadata: ["file": .string(path), "error": .string("\(error)")])
        }
    }

    private static func load(_ path: String) throws -> (RemoteConfig, FileStamp?) {
        let stamp = stamp(path)
        guard let data = FileManager.default.contents(atPath: path) else { throw RemoteConfig.Invalid(description: "\(path) cannot be read") }
        guard data.count <= 1 << 20 else { throw RemoteConfig.Invalid(description: "\(path) is larger than 1 MiB") }
        return (try RemoteConfig(json: data), stamp)
    }

    private static func stamp(_ path: String) -> FileStamp? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let modified = attributes[.modificationDate] as? Date, let size = (attributes[.size] as? NSNumber)?.intValue
        else { return nil }
        return FileStamp(modified: modified, size: size)
    }
}
