import BFFPlatform

/// A subject or topic the catalogue does not hold, named by the request field that referred to it.
/// Settings, chat creation and the tutoring turn refuse with it; the answer is in `SettingsHandlers.swift`.
enum CatalogueError: Error, Equatable {
    case unknownSubject(field: String)
    case unknownTopic(field: String, problem: Phrase.Problem)
}
