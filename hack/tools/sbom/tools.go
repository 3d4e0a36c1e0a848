//go:build tools

// Package tools pins cyclonedx-gomod in a module of its own, so its
// dependencies do not move the project's. `make release` builds it from here
// and writes a CycloneDX SBOM of each released binary with its `bin`
// subcommand, from the module list Go records in every binary.
package tools

import _ "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
