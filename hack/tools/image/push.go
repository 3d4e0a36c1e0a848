package main

import (
	"context"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push uploads the image index of the layout at dir to ref, with the
// credentials `docker login` (or a credential helper) left in the Docker
// config: no Docker engine is involved. It returns the index's digest,
// the same as the layout's, since the bytes are pushed as they are.
func push(ctx context.Context, dir, ref string, opts ...remote.Option) (v1.Hash, error) {
	idx, err := layoutIndex(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}
