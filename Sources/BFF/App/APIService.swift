import BFFAPI
import Foundation
import OpenAPIRuntime

/// The generated server protocol's implementation. Handlers stay thin: each capability folder holds
/// the logic. Operations of later issues answer 501 `not_implemented`, as `openapi.yaml` documents.
struct APIService: APIProtocol {
    let health: HealthHandlers
    let auth: AuthService

    init(dependencies: AppDependencies) {
        health = HealthHandlers(database: dependencies.database, latestVersion: dependencies.migrator.latestVersion)
        auth = dependencies.authService
    }

    func getHealthz(_ input: Operations.GetHealthz.Input) async throws -> Operations.GetHealthz.Output {
        .ok(.init(body: .json(.init(status: .ok))))
    }

    func getReadyz(_ input: Operations.GetReadyz.Input) async throws -> Operations.GetReadyz.Output {
        switch await health.readiness() {
        case .success(let version):
            return .ok(.init(body: .json(.init(status: .ready, schemaVersion: version))))
        case .failure(let error):
            return .serviceUnavailable(.init(body: .json(.init(code: error.code, message: error.message))))
        }
    }

    func listChats(_ input: Operations.ListChats.Input) async throws -> Operations.ListChats.Output { throw APIError.notImplemented }
    func createChat(_ input: Operations.CreateChat.Input) async throws -> Operations.CreateChat.Output { throw APIError.notImplemented }
    func getChat(_ input: Operations.GetChat.Input) async throws -> Operations.GetChat.Output { throw APIError.notImplemented }
    func renameChat(_ input: Operations.RenameChat.Input) async throws -> Operations.RenameChat.Output { throw APIError.notImplemented }
    func deleteChat(_ input: Operations.DeleteChat.Input) async throws -> Operations.DeleteChat.Output { throw APIError.notImplemented }
    func listMessages(_ input: Operations.ListMessages.Input) async throws -> Operations.ListMessages.Output { throw APIError.notImplemented }
    func evaluateChat(_ input: Operations.EvaluateChat.Input) async throws -> Operations.EvaluateChat.Output { throw APIError.notImplemented }
    func listChatTags(_ input: Operations.ListChatTags.Input) async throws -> Operations.ListChatTags.Output { throw APIError.notImplemented }
    func getSettings(_ input: Operations.GetSettings.Input) async throws -> Operations.GetSettings.Output { throw APIError.notImplemented }
    func replaceSettings(_ input: Operations.ReplaceSettings.Input) async throws -> Operations.ReplaceSettings.Output { throw APIError.notImplemented }
    func listSubjects(_ input: Operations.ListSubjects.Input) async throws -> Operations.ListSubjects.Output { throw APIError.notImplemented }
    func chatTurn(_ input: Operations.ChatTurn.Input) async throws -> Operations.ChatTurn.Output { throw APIError.notImplemented }
    func registerPushToken(_ input: Operations.RegisterPushToken.Input) async throws -> Operations.RegisterPushToken.Output { throw APIError.notImplemented }
    func verifyPurchase(_ input: Operations.VerifyPurchase.Input) async throws -> Operations.VerifyPurchase.Output { throw APIError.notImplemented }
}
