import BFFPlatform

/// Why a login, a back-channel logout or a device's id was refused; a refresh token's own refusals
/// are `RefreshRefusal`.
enum AuthRefusal: Error, Equatable {
    /// A value the contract's schema lets through but the service does not accept.
    case invalid(field: String, problem: Phrase.Problem)
    /// The redirect URI is not one of `BFF_OIDC_REDIRECT_URIS`.
    case unregisteredRedirectURI
    /// The login's state is unknown, expired or already used.
    case unknownLogin
    /// The app's PKCE verifier is missing or does not match the login's challenge.
    case verifierMismatch
    /// The identity provider did not accept the login (its code, its ID token).
    case loginRejected
    /// The back-channel logout token did not verify.
    case logoutTokenRejected
    /// The identity provider could not be reached or answered with a server error.
    case idpUnavailable
}
