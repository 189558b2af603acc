/*
Copyright 2026 The Talon Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package metal

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
)

// maxAssetSize bounds a kernel or initramfs download.
const maxAssetSize = 1 << 30

// AssetCache downloads boot assets once into a directory the boot service serves
// (/assets/<name>), verified against their SHA-512. It is safe for concurrent use.
type AssetCache struct {
	// Dir is the boot service's asset directory.
	Dir string
	// Client downloads; http.DefaultClient with a 10-minute timeout when nil.
	Client *http.Client

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Ensure downloads the kernel and initramfs of assets for arch into the cache unless they are
// there, and returns their names in it.
func (c *AssetCache) Ensure(ctx context.Context, assets infrav1.BootAssets, arch infrav1.Architecture) (infrav1.HostBootAssets, error) {
	if arch == "" {
		arch = "amd64"
	}
	var kernel, initramfs source
	switch {
	case assets.Kernel != nil && assets.Initramfs != nil:
		kernel = source{url: assets.Kernel.URL, sha512: assets.Kernel.SHA512, name: path.Join("sha512", assets.Kernel.SHA512)}
		initramfs = source{url: assets.Initramfs.URL, sha512: assets.Initramfs.SHA512, name: path.Join("sha512", assets.Initramfs.SHA512)}
	case assets.ImageFactory != nil:
		f := assets.ImageFactory
		if f.Schematic == "" || f.Version == "" {
			return infrav1.HostBootAssets{}, errors.New("spec.bootAssets.imageFactory names no schematic and version, and the Machine's bootstrap config has resolved none")
		}
		base := strings.TrimSuffix(f.URL, "/")
		if base == "" {
			base = "https://factory.talos.dev"
		}
		// The Image Factory publishes no checksums: the spec may pin them, else the first
		// download is the one kept.
		dir := path.Join("factory", f.Schematic, f.Version)
		kernel = source{url: fmt.Sprintf("%s/image/%s/%s/kernel-%s", base, f.Schematic, f.Version, arch), name: path.Join(dir, "kernel-"+string(arch)), sha512: f.KernelSHA512}
		initramfs = source{url: fmt.Sprintf("%s/image/%s/%s/initramfs-%s.xz", base, f.Schematic, f.Version, arch), name: path.Join(dir, "initramfs-"+string(arch)+".xz"), sha512: f.InitramfsSHA512}
		if f.KernelSHA512 != "" {
			kernel.name = path.Join("sha512", f.KernelSHA512)
		}
		if f.InitramfsSHA512 != "" {
			initramfs.name = path.Join("sha512", f.InitramfsSHA512)
		}
	default:
		return infrav1.HostBootAssets{}, errors.New("spec.bootAssets names neither kernel and initramfs nor an Image Factory schematic")
	}
	for _, s := range []source{kernel, initramfs} {
		if err := c.ensure(ctx, s); err != nil {
			return infrav1.HostBootAssets{}, err
		}
	}
	return infrav1.HostBootAssets{Kernel: kernel.name, Initramfs: initramfs.name}, nil
}

// source is one asset to cache.
type source struct {
	url, sha512, name string
}

func (c *AssetCache) lock(name string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks == nil {
		c.locks = map[string]*sync.Mutex{}
	}
	if c.locks[name] == nil {
		c.locks[name] = &sync.Mutex{}
	}
	return c.locks[name]
}

// ensure downloads s unless the cache holds it.
func (c *AssetCache) ensure(ctx context.Context, s source) error {
	lock := c.lock(s.name)
	lock.Lock()
	defer lock.Unlock()
	target := filepath.Join(c.Dir, filepath.FromSlash(s.name))
	if info, err := os.Stat(target); err == nil && info.Mode().IsRegular() {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".download-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	sum := sha512.New()
	if err := c.download(ctx, s.url, io.MultiWriter(tmp, sum)); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); s.sha512 != "" && got != s.sha512 {
		return fmt.Errorf("boot asset %s has SHA-512 %s, not the %s spec.bootAssets gives: the download was discarded", s.url, got, s.sha512)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), target)
}

func (c *AssetCache) download(ctx context.Context, url string, w io.Writer) error {
	client := c.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return fmt.Errorf("invalid boot asset URL %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("failed to download boot asset: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("failed to download boot asset %s: %s", url, resp.Status)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, maxAssetSize+1))
	if err != nil {
		return fmt.Errorf("failed to download boot asset %s: %w", url, err)
	}
	if n > maxAssetSize {
		return fmt.Errorf("boot asset %s is larger than %d bytes", url, maxAssetSize)
	}
	return nil
}
