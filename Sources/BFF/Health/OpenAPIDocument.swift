import BFFAPI
import BFFPlatform
import Foundation
import OpenAPIRuntime

/// `GET /openapi.yaml`: the contract this server was built from (`BFF_OPENAPI_FILE`, read once at
/// start-up; the image carries it next to the binary), for client teams' generators and API browsers.
extension APIService {
    func getOpenAPIDocument(_ input: Operations.GetOpenAPIDocument.Input) async throws -> Operations.GetOpenAPIDocument.Output {
        guard let document = openAPIDocument else { throw APIError(.notFound, .contractFileMissing) }
        return .ok(.init(body: .yaml(HTTPBody(document))))
    }
}
