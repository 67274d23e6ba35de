import BFFPlatform
import Foundation

/// The LLM behind the tutoring turn (`BFF_LLM_*`, docs/configuration.md): an OpenAI-compatible Chat
/// Completions API in one of two dialects. Without `BFF_LLM_BASE_URL` there is none, and turns
/// answer 503 `llm_unavailable`.
public struct LLMConfiguration: Sendable, Equatable {
    public enum API: String, Sendable {
        /// Azure OpenAI: `{base}/openai/deployments/{model}/chat/completions?api-version=…`, an `api-key` header.
        case azure
        /// OpenAI and the servers that copy it (vLLM, Ollama, llama.cpp, LiteLLM): `{base}/chat/completions`, Bearer.
        case openai
    }

    public var api: API
    /// Without a trailing slash; for `openai` it includes `/v1`.
    public var baseURL: String
    public var apiKey: String?
    /// The model, or Azure's deployment name.
    public var model: String
    /// Azure's `api-version`.
    public var apiVersion: String
    /// From sending the request to the reply's first text.
    public var firstTokenTimeout: Duration
    /// The whole turn's upstream call, first byte to last.
    public var totalTimeout: Duration
    public var maxOutputTokens: Int
    /// Characters of a chat's history sent with a turn, counted from the newest message back.
    public var historyBudget: Int

    /// The URL a chat completion is posted to.
    var endpoint: String {
        switch api {
        case .azure: "\(baseURL)/openai/deployments/\(model)/chat/completions?api-version=\(apiVersion)"
        case .openai: "\(baseURL)/chat/completions"
        }
    }

    /// Nil without `BFF_LLM_BASE_URL`; otherwise every variable checked, each failure naming it.
    init?(_ reader: EnvironmentReader) throws {
        guard let base = reader.optional("BFF_LLM_BASE_URL") else {
            // Half a configuration is a mistake to report, not an LLM to leave off.
            for name in ["BFF_LLM_API_KEY", "BFF_LLM_MODEL", "BFF_LLM_API", "BFF_LLM_API_VERSION"] where reader.optional(name) != nil {
                throw ConfigurationError("BFF_LLM_BASE_URL", "is required when \(name) is set")
            }
            return nil
        }
        let apiName = reader.string("BFF_LLM_API", default: "openai")
        guard let api = API(rawValue: apiName) else { throw ConfigurationError("BFF_LLM_API", "must be azure or openai, got \"\(apiName)\"") }
        self.api = api
        // The learners' words travel to it: https, or plain http to a server on this host (a local model, tests).
        guard let url = URL(string: base), let scheme = url.scheme, let host = url.host, url.query == nil,
            scheme == "https" || (scheme == "http" && ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host))
        else { throw ConfigurationError("BFF_LLM_BASE_URL", "must be an https URL (http only for localhost), got \"\(base)\"") }
        baseURL = base.hasSuffix("/") ? String(base.dropLast()) : base
        apiKey = reader.optional("BFF_LLM_API_KEY")
        if api == .azure, apiKey == nil { throw ConfigurationError("BFF_LLM_API_KEY", "is required with BFF_LLM_API=azure") }
        model = try reader.required("BFF_LLM_MODEL")
        guard model.utf8.count <= 128, model.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !"/?#%\"\\ ".utf8.contains($0) }) else {
            throw ConfigurationError("BFF_LLM_MODEL", "must be a model or deployment name (printable ASCII without / ? # % or spaces)")
        }
        apiVersion = reader.string("BFF_LLM_API_VERSION", default: "2024-10-21")
        guard apiVersion.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D }) else {
            throw ConfigurationError("BFF_LLM_API_VERSION", "must look like 2024-10-21, got \"\(apiVersion)\"")
        }
        firstTokenTimeout = .seconds(try reader.int("BFF_LLM_TIMEOUT", default: 15, range: 1...300))
        totalTimeout = .seconds(try reader.int("BFF_LLM_TOTAL_TIMEOUT", default: 60, range: 1...600))
        if totalTimeout < firstTokenTimeout {
            throw ConfigurationError("BFF_LLM_TOTAL_TIMEOUT", "must not be shorter than BFF_LLM_TIMEOUT")
        }
        maxOutputTokens = try reader.int("BFF_LLM_MAX_OUTPUT_TOKENS", default: 800, range: 16...32_768)
        historyBudget = try reader.int("BFF_LLM_HISTORY_CHARS", default: 12_000, range: 0...1_000_000)
    }

    public init(
        api: API, baseURL: String, apiKey: String?, model: String, apiVersion: String = "2024-10-21",
        firstTokenTimeout: Duration = .seconds(15), totalTimeout: Duration = .seconds(60), maxOutputTokens: Int = 800,
        historyBudget: Int = 12_000
    ) {
        self.api = api
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.model = model
        self.apiVersion = apiVersion
        self.firstTokenTimeout = firstTokenTimeout
        self.totalTimeout = totalTimeout
        self.maxOutputTokens = maxOutputTokens
        self.historyBudget = historyBudget
    }
}
