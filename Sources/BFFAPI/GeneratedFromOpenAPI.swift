// The types and server protocol of this module are generated from openapi.yaml at build time by
// swift-openapi-generator (see openapi-generator-config.yaml); SwiftPM needs one source file here.
