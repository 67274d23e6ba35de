#!/usr/bin/env python3
"""Makes authjs-session-vectors.json: Auth.js v5 session tokens for AuthJSSessionTokenTests.

It reproduces, step by step, what @auth/core 0.41.3 does in packages/core/src/jwt.ts (`encode`,
`getDerivedEncryptionKey`) and packages/core/src/lib/utils/cookie.ts (`SessionStore`'s chunks),
with jose's compact JWE serialisation (`EncryptJWT(...).encrypt`), so that the Swift decryptor is
tested against an implementation that is not its own. The vectors are committed: the Swift tests
need no Python. Run it again (python3 make-authjs-vectors.py > authjs-session-vectors.json) only
when the scheme changes; it is deterministic (IVs and ids are derived from each vector's name), so
an unchanged scheme gives an unchanged file.

Needs PyPI `cryptography` (any release with HKDF, AES-CBC and AES-GCM).
"""

import base64
import hashlib
import hmac
import json
import sys
import uuid

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

AUTHJS_CORE_VERSION = "0.41.3"
SECURE_COOKIE = "__Secure-authjs.session-token"
INSECURE_COOKIE = "authjs.session-token"
# cookie.ts: ALLOWED_COOKIE_SIZE - ESTIMATED_EMPTY_COOKIE_SIZE
CHUNK_SIZE = 4096 - 160
DEFAULT_MAX_AGE = 30 * 24 * 60 * 60
# 2026-01-01T00:00:00Z: the "now" every vector is checked at.
NOW = 1767225600
ISSUER = "https://idp.example.com"

# Secrets as `npx auth secret` makes them (32 random bytes, base64), fixed here.
SECRET_A = "pQ7v3wB6o5Yh8s1kM7c9dXgR4tLzJf+Nw0eAqVb2U1c="
SECRET_B = "Zr4mT8xK2nW6yH0qJ5cV9bL3fD7sG1pA+uE6oI2tR8w="
SECRET_C = "kN3jF6hB9vC2xM5zQ8wE1rT4yU7iO0pA/sD3fG6hJ9k="


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def derived_key(secret: str, salt: str, enc: str) -> bytes:
    """jwt.ts getDerivedEncryptionKey: HKDF-SHA256(secret, salt, "Auth.js Generated Encryption Key (<salt>)")."""
    length = {"A256CBC-HS512": 64, "A256GCM": 32}[enc]
    return HKDF(
        algorithm=hashes.SHA256(),
        length=length,
        salt=salt.encode("utf-8"),
        info=f"Auth.js Generated Encryption Key ({salt})".encode("utf-8"),
    ).derive(secret.encode("utf-8"))


def thumbprint(key: bytes) -> str:
    """RFC 7638 thumbprint of the oct JWK, with SHA-(bits of the key), as jwt.ts's calculateJwkThumbprint call."""
    members = json.dumps({"k": b64url(key), "kty": "oct"}, separators=(",", ":"), sort_keys=True)
    digest = {64: hashlib.sha512, 32: hashlib.sha256}[len(key)]
    return b64url(digest(members.encode("utf-8")).digest())


def deterministic(name: str, size: int) -> bytes:
    return hashlib.sha256(("iv:" + name).encode("utf-8")).digest()[:size]


def payload_bytes(claims) -> bytes:
    # jose serialises with JSON.stringify: no spaces, non-ASCII as is.
    return json.dumps(claims, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encrypt(plaintext: bytes, key: bytes, header: dict, iv: bytes, enc: str = "A256CBC-HS512", encrypted_key: str = "") -> str:
    """jose's compact JWE with alg dir: BASE64URL(header).<encrypted key>.BASE64URL(iv).BASE64URL(ciphertext).BASE64URL(tag)."""
    protected = b64url(json.dumps(header, separators=(",", ":")).encode("utf-8"))
    aad = protected.encode("ascii")
    if enc == "A256CBC-HS512":
        # RFC 7518 §5.2.2.1 with §5.2.5's sizes: MAC key first, encryption key last.
        mac_key, enc_key = key[:32], key[32:]
        padder = padding.PKCS7(128).padder()
        padded = padder.update(plaintext) + padder.finalize()
        encryptor = Cipher(algorithms.AES(enc_key), modes.CBC(iv)).encryptor()
        ciphertext = encryptor.update(padded) + encryptor.finalize()
        al = (len(aad) * 8).to_bytes(8, "big")
        tag = hmac.new(mac_key, aad + iv + ciphertext + al, hashlib.sha512).digest()[:32]
    elif enc == "A256GCM":
        sealed = AESGCM(key).encrypt(iv, plaintext, aad)
        ciphertext, tag = sealed[:-16], sealed[-16:]
    else:
        raise ValueError(enc)
    return ".".join([protected, encrypted_key, b64url(iv), b64url(ciphertext), b64url(tag)])


def claims_for(name: str, **changes) -> dict:
    """A token as the web's jwt callback leaves it (docs/web-session.md), then jwt.ts's iat, exp and jti."""
    claims = {
        "name": "学習 太郎",
        "email": "taro@example.com",
        "picture": None,
        "sub": str(uuid.uuid5(uuid.NAMESPACE_URL, "sub:" + name)),
        "idp_iss": ISSUER,
        "idp_sub": "idp-subject-42",
        "auth_time": NOW - 300,
        "iat": NOW - 60,
        "exp": NOW - 60 + DEFAULT_MAX_AGE,
        "jti": str(uuid.uuid5(uuid.NAMESPACE_URL, "jti:" + name)),
    }
    claims.update(changes)
    return {key: value for key, value in claims.items() if value is not Ellipsis}


def chunk(name: str, token: str) -> dict:
    """cookie.ts SessionStore#chunk: one cookie when it fits, else <name>.0, <name>.1, … of CHUNK_SIZE characters."""
    if len(token) <= CHUNK_SIZE:
        return {name: token}
    return {f"{name}.{index}": token[start:start + CHUNK_SIZE] for index, start in enumerate(range(0, len(token), CHUNK_SIZE))}


def flip(segment: str) -> str:
    """The segment with one bit of its first byte changed, still valid base64url."""
    raw = bytearray(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    raw[0] ^= 0x01
    return b64url(bytes(raw))


vectors = []


def add(name, *, environment, cookies, outcome, claims=None, reason=None, mint=None):
    vector = {"name": name, "environment": environment, "cookies": cookies, "now": NOW, "outcome": outcome}
    if outcome == "accept":
        vector["claims"] = claims
        if mint is not None:
            vector["mint"] = mint
    else:
        vector["reason"] = reason
    vectors.append(vector)


def standard(name, secret=SECRET_A, salt=SECURE_COOKIE, kid=True, claims=None, enc="A256CBC-HS512"):
    """A token as jwt.ts encode makes it (with kid), or without kid; and what the Swift test minter needs to make it again."""
    claims = claims if claims is not None else claims_for(name)
    key = derived_key(secret, salt, enc)
    header = {"alg": "dir", "enc": enc}
    if kid:
        header["kid"] = thumbprint(key)
    iv = deterministic(name, 16 if enc == "A256CBC-HS512" else 12)
    plaintext = payload_bytes(claims)
    mint = {"secret": secret, "salt": salt, "kid": kid, "iv": b64url(iv), "plaintext": plaintext.decode("utf-8")}
    return encrypt(plaintext, key, header, iv, enc), claims, mint


one_secret = {"BFF_WEB_AUTH_SECRET": SECRET_A}

# --- accepted ------------------------------------------------------------------------------------

token, claims, mint = standard("valid with kid")
add("valid with kid", environment=one_secret, cookies={SECURE_COOKIE: token}, outcome="accept", claims=claims, mint=mint)

token, claims, mint = standard("valid without kid", kid=False)
add("valid without kid (only the first secret is tried)", environment=one_secret, cookies={SECURE_COOKIE: token},
    outcome="accept", claims=claims, mint=mint)

token, claims, mint = standard("second secret", secret=SECRET_B)
add("valid, encrypted with the secret of BFF_WEB_AUTH_SECRET_1 (its kid names it)",
    environment={"BFF_WEB_AUTH_SECRET": SECRET_A, "BFF_WEB_AUTH_SECRET_1": SECRET_B},
    cookies={SECURE_COOKIE: token}, outcome="accept", claims=claims, mint=mint)

token, claims, mint = standard("fourth secret", secret=SECRET_C)
add("valid, encrypted with the secret of BFF_WEB_AUTH_SECRET_3",
    environment={"BFF_WEB_AUTH_SECRET": SECRET_A, "BFF_WEB_AUTH_SECRET_1": SECRET_B, "BFF_WEB_AUTH_SECRET_3": SECRET_C},
    cookies={SECURE_COOKIE: token}, outcome="accept", claims=claims, mint=mint)

token, claims, mint = standard("two chunks", claims=claims_for("two chunks", picture="https://img.example.com/" + "a" * 3000))
cookies = chunk(SECURE_COOKIE, token)
assert len(cookies) == 2, len(cookies)
# Beside the web's other cookies, as a browser sends them.
cookies = {"__Host-authjs.csrf-token": "c3JmLXRva2Vu%7Chash", **cookies, "__Secure-authjs.callback-url": "https%3A%2F%2Fapp.example.com"}
add("valid, chunked into two cookies, among the web's other cookies", environment=one_secret, cookies=cookies, outcome="accept",
    claims=claims, mint=mint)

token, claims, mint = standard("three chunks", claims=claims_for("three chunks", picture="https://img.example.com/" + "b" * 7000))
cookies = chunk(SECURE_COOKIE, token)
assert len(cookies) == 3, len(cookies)
# Listed out of order: the order of the Cookie header does not matter, the suffixes do.
add("valid, chunked into three cookies sent out of order", environment=one_secret,
    cookies={key: cookies[key] for key in sorted(cookies, reverse=True)}, outcome="accept", claims=claims, mint=mint)

token, claims, mint = standard("unchunked wins")
add("an unchunked cookie is used as it is, whatever chunks are beside it", environment=one_secret,
    cookies={SECURE_COOKIE + ".0": "left-over-chunk", SECURE_COOKIE: token}, outcome="accept", claims=claims, mint=mint)

token, claims, mint = standard("insecure", salt=INSECURE_COOKIE)
add("valid authjs.session-token (its own salt) with BFF_WEB_AUTH_INSECURE_COOKIE=true",
    environment={"BFF_WEB_AUTH_SECRET": SECRET_A, "BFF_WEB_AUTH_INSECURE_COOKIE": "true"},
    cookies={INSECURE_COOKIE: token}, outcome="accept", claims=claims, mint=mint)

token, claims, mint = standard("within leeway", claims=claims_for("within leeway", exp=NOW - 14))
add("expired 14 s ago: within the 15 s leeway", environment=one_secret, cookies={SECURE_COOKIE: token},
    outcome="accept", claims=claims, mint=mint)

token, claims, mint = standard("minimal claims", claims={"iat": NOW - 60, "exp": NOW + 60})
add("only iat and exp (the decryptor asks for nothing more)", environment=one_secret, cookies={SECURE_COOKIE: token},
    outcome="accept", claims=claims, mint=mint)

# --- refused -------------------------------------------------------------------------------------

token, _, _ = standard("expired at the edge", claims=claims_for("expired at the edge", exp=NOW - 15))
add("expired 15 s ago: at the leeway's end", environment=one_secret, cookies={SECURE_COOKIE: token},
    outcome="reject", reason="expired")

token, _, _ = standard("expired", claims=claims_for("expired", exp=NOW - 16))
add("expired beyond the 15 s leeway", environment=one_secret, cookies={SECURE_COOKIE: token}, outcome="reject", reason="expired")

token, _, _ = standard("no exp", claims=claims_for("no exp", exp=...))
add("no exp claim", environment=one_secret, cookies={SECURE_COOKIE: token}, outcome="reject", reason="claims")

token, _, _ = standard("string exp", claims=claims_for("string exp", exp=str(NOW + 60)))
add("exp is a string", environment=one_secret, cookies={SECURE_COOKIE: token}, outcome="reject", reason="claims")

key = derived_key(SECRET_A, SECURE_COOKIE, "A256CBC-HS512")
array_token = encrypt(b"[1,2,3]", key, {"alg": "dir", "enc": "A256CBC-HS512", "kid": thumbprint(key)}, deterministic("array", 16))
add("the payload is a JSON array, not claims", environment=one_secret, cookies={SECURE_COOKIE: array_token},
    outcome="reject", reason="claims")

token, _, _ = standard("tampered")
parts = token.split(".")
add("tampered ciphertext", environment=one_secret,
    cookies={SECURE_COOKIE: ".".join(parts[:3] + [flip(parts[3])] + parts[4:])}, outcome="reject", reason="tag")
add("tampered tag", environment=one_secret,
    cookies={SECURE_COOKIE: ".".join(parts[:4] + [flip(parts[4])])}, outcome="reject", reason="tag")
add("tampered IV", environment=one_secret,
    cookies={SECURE_COOKIE: ".".join(parts[:2] + [flip(parts[2])] + parts[3:])}, outcome="reject", reason="tag")
header = json.loads(base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
header["typ"] = "JWT"
add("tampered header (a member added, the tag left as it was)", environment=one_secret,
    cookies={SECURE_COOKIE: ".".join([b64url(json.dumps(header, separators=(",", ":")).encode())] + parts[1:])},
    outcome="reject", reason="tag")
# 40 characters: 30 bytes, a whole base64url group short of the 32 a tag has.
add("truncated tag", environment=one_secret, cookies={SECURE_COOKIE: token[:-3]}, outcome="reject", reason="tag")

token, _, _ = standard("wrong secret")
add("wrong secret (its kid names no key of ours)", environment={"BFF_WEB_AUTH_SECRET": SECRET_C},
    cookies={SECURE_COOKIE: token}, outcome="reject", reason="kid")
token, _, _ = standard("wrong secret without kid", kid=False)
add("wrong secret, without kid", environment={"BFF_WEB_AUTH_SECRET": SECRET_C},
    cookies={SECURE_COOKIE: token}, outcome="reject", reason="tag")
token, _, _ = standard("second secret without kid", secret=SECRET_B, kid=False)
add("without kid, encrypted with the second secret: only the first is tried",
    environment={"BFF_WEB_AUTH_SECRET": SECRET_A, "BFF_WEB_AUTH_SECRET_1": SECRET_B},
    cookies={SECURE_COOKIE: token}, outcome="reject", reason="tag")

token, _, _ = standard("wrong salt", salt=INSECURE_COOKIE)
add("wrong salt: authjs.session-token's key in the __Secure- cookie", environment=one_secret,
    cookies={SECURE_COOKIE: token}, outcome="reject", reason="kid")
token, _, _ = standard("wrong salt without kid", salt=INSECURE_COOKIE, kid=False)
add("wrong salt, without kid", environment=one_secret, cookies={SECURE_COOKIE: token}, outcome="reject", reason="tag")
token, _, _ = standard("secure salt in the insecure cookie")
add("__Secure- cookie's token sent as authjs.session-token", environment={"BFF_WEB_AUTH_SECRET": SECRET_A, "BFF_WEB_AUTH_INSECURE_COOKIE": "true"},
    cookies={INSECURE_COOKIE: token}, outcome="reject", reason="kid")
token, _, _ = standard("insecure cookie name")
add("the insecure cookie without BFF_WEB_AUTH_INSECURE_COOKIE: not read", environment=one_secret,
    cookies={INSECURE_COOKIE: token}, outcome="reject", reason="no cookie")

token, _, _ = standard("gcm", enc="A256GCM")
add("A256GCM (which Auth.js would decrypt): refused", environment=one_secret, cookies={SECURE_COOKIE: token},
    outcome="reject", reason="enc")

claims = claims_for("alg")
kw_token = encrypt(payload_bytes(claims), key, {"alg": "A256KW", "enc": "A256CBC-HS512", "kid": thumbprint(key)}, deterministic("alg", 16))
add("alg A256KW (the tag is right for its header)", environment=one_secret, cookies={SECURE_COOKIE: kw_token},
    outcome="reject", reason="alg")
none_token = encrypt(payload_bytes(claims), key, {"alg": "none", "enc": "A256CBC-HS512", "kid": thumbprint(key)}, deterministic("none", 16))
add("alg none", environment=one_secret, cookies={SECURE_COOKIE: none_token}, outcome="reject", reason="alg")
hs_token = encrypt(payload_bytes(claims), key, {"alg": "dir", "enc": "A128CBC-HS256", "kid": thumbprint(key)}, deterministic("enc", 16))
add("enc A128CBC-HS256", environment=one_secret, cookies={SECURE_COOKIE: hs_token}, outcome="reject", reason="enc")
crit_token = encrypt(payload_bytes(claims), key, {"alg": "dir", "enc": "A256CBC-HS512", "kid": thumbprint(key), "crit": ["exp"]},
                     deterministic("crit", 16))
add("crit header (nothing here is understood as critical)", environment=one_secret, cookies={SECURE_COOKIE: crit_token},
    outcome="reject", reason="header")
zip_token = encrypt(payload_bytes(claims), key, {"alg": "dir", "enc": "A256CBC-HS512", "kid": thumbprint(key), "zip": "DEF"},
                    deterministic("zip", 16))
add("zip header", environment=one_secret, cookies={SECURE_COOKIE: zip_token}, outcome="reject", reason="header")
with_key = encrypt(payload_bytes(claims), key, {"alg": "dir", "enc": "A256CBC-HS512", "kid": thumbprint(key)}, deterministic("encrypted key", 16),
                   encrypted_key=b64url(b"\x00" * 16))
add("an encrypted key with alg dir", environment=one_secret, cookies={SECURE_COOKIE: with_key}, outcome="reject", reason="encrypted key")

token, _, _ = standard("malformed")
parts = token.split(".")
add("malformed base64url in the IV", environment=one_secret,
    cookies={SECURE_COOKIE: ".".join(parts[:2] + ["!" + parts[2][1:]] + parts[3:])}, outcome="reject", reason="base64")
add("padded base64 in the ciphertext", environment=one_secret,
    cookies={SECURE_COOKIE: ".".join(parts[:3] + [parts[3] + "=="] + parts[4:])}, outcome="reject", reason="base64")
add("malformed base64url in the header", environment=one_secret,
    cookies={SECURE_COOKIE: "e30*" + token}, outcome="reject", reason="base64")
add("the header is no JSON", environment=one_secret,
    cookies={SECURE_COOKIE: ".".join([b64url(b"not json")] + parts[1:])}, outcome="reject", reason="header")
add("four parts", environment=one_secret, cookies={SECURE_COOKIE: ".".join(parts[:4])}, outcome="reject", reason="parts")
add("six parts", environment=one_secret, cookies={SECURE_COOKIE: token + ".AAAA"}, outcome="reject", reason="parts")
add("three parts (a JWS)", environment=one_secret, cookies={SECURE_COOKIE: "e30.e30.AAAA"}, outcome="reject", reason="parts")
add("an empty cookie", environment=one_secret, cookies={SECURE_COOKIE: ""}, outcome="reject", reason="no cookie")
add("the IV is 12 bytes", environment=one_secret,
    cookies={SECURE_COOKIE: ".".join(parts[:2] + [b64url(b"\x01" * 12)] + parts[3:])}, outcome="reject", reason="iv")

token, _, _ = standard("gap", claims=claims_for("gap", picture="https://img.example.com/" + "c" * 7000))
cookies = chunk(SECURE_COOKIE, token)
assert len(cookies) == 3
del cookies[SECURE_COOKIE + ".1"]
add("chunks .0 and .2 without .1: read up to the gap", environment=one_secret, cookies=cookies, outcome="reject", reason="parts")

json.dump(
    {
        "about": "Auth.js v5 session tokens made by Tests/BFFTests/Auth/Vectors/make-authjs-vectors.py, reproducing "
        f"@auth/core {AUTHJS_CORE_VERSION}'s jwt.ts; checked by AuthJSSessionTokenTests. Every vector is checked at its `now`.",
        "authjs_core_version": AUTHJS_CORE_VERSION,
        "vectors": vectors,
    },
    sys.stdout,
    indent=2,
    ensure_ascii=False,
)
sys.stdout.write("\n")
