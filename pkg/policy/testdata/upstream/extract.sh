#!/bin/sh
# Regenerates readme/ and examples/ from the sigs.k8s.io/descheduler module
# that go.mod requires: every file of its examples/ directory, and every YAML
# block of kind DeschedulerPolicy in its README.md, each with a first line
# naming where it came from. Run from anywhere inside the module.
set -eu
src=$(go list -m -f '{{.Dir}}' sigs.k8s.io/descheduler)
ver=$(go list -m -f '{{.Version}}' sigs.k8s.io/descheduler)
cd "$(dirname "$0")"
rm -rf examples readme
mkdir examples readme
for f in "$src"/examples/*; do
	name=$(basename "$f")
	{ echo "# Copied from sigs.k8s.io/descheduler@$ver examples/$name."; cat "$f"; } >"examples/$name"
done
awk -v ver="$ver" '
!inblock && /^#+ / { section = $0; sub(/^#+ /, "", section); next }
/^```yaml/ { inblock = 1; start = NR; body = ""; next }
inblock && /^```/ {
	inblock = 0
	if (body !~ /kind: "?DeschedulerPolicy/) next
	slug = tolower(section); gsub(/[^a-z0-9]+/, "-", slug); gsub(/^-|-$/, "", slug)
	file = sprintf("readme/%02d-%s.yaml", ++n, slug)
	printf "# Extracted from sigs.k8s.io/descheduler@%s README.md, lines %d-%d (section \"%s\").\n%s", ver, start + 1, NR - 1, section, body >file
	close(file)
	next
}
inblock { body = body $0 "\n" }
' "$src/README.md"
