import Foundation

/// NIOSSL's errors name neither the file nor what was wrong with it ("failedToLoadCertificate"),
/// which is all an operator would see.
package func loadPEM<Value>(_ variable: String, _ path: String, as what: String, _ load: () throws -> Value) throws -> Value {
    guard FileManager.default.isReadableFile(atPath: path) else {
        throw ConfigurationError(variable, "names \(path), which does not exist or is not readable by this user")
    }
    do {
        return try load()
    } catch {
        throw ConfigurationError(variable, "names \(path), which could not be read as a PEM \(what) (\(error))")
    }
}
