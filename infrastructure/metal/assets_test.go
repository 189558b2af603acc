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
	"crypto/sha512"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	infrav1 "github.com/talon-capi/talon/api/infrastructure/v1alpha1"
	"github.com/talon-capi/talon/internal/imagefactory"
	"github.com/talon-capi/talon/internal/imagefactory/factorytest"
)

func sha(data string) string {
	s := sha512.Sum512([]byte(data))
	return hex.EncodeToString(s[:])
}

// The cache keeps a download only when its SHA-512 is the one the spec gives, and downloads
// each asset once.
func TestAssetCacheVerifiesAndDownloadsOnce(t *testing.T) {
	g := NewWithT(t)
	requests := 0
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		content := map[string]string{"/vmlinuz": "content of /vmlinuz", "/initramfs.xz": "content of /initramfs.xz", "/other-vmlinuz": "content of /other-vmlinuz"}
		_, _ = w.Write([]byte(content[r.URL.Path]))
	}))
	t.Cleanup(server.Close)
	cache := &AssetCache{Dir: t.TempDir()}
	assets := infrav1.BootAssets{
		Kernel:    &infrav1.Asset{URL: server.URL + "/vmlinuz", SHA512: sha("content of /vmlinuz")},
		Initramfs: &infrav1.Asset{URL: server.URL + "/initramfs.xz", SHA512: sha("content of /initramfs.xz")},
	}
	names, err := cache.Ensure(t.Context(), assets, "amd64")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names.Kernel).To(Equal("sha512/" + sha("content of /vmlinuz")))
	data, err := os.ReadFile(filepath.Join(cache.Dir, names.Initramfs))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal("content of /initramfs.xz"))
	_, err = cache.Ensure(t.Context(), assets, "amd64")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(requests).To(Equal(2), "cached assets are not downloaded again")

	tampered := infrav1.BootAssets{
		Kernel:    &infrav1.Asset{URL: server.URL + "/other-vmlinuz", SHA512: sha("what the release published")},
		Initramfs: assets.Initramfs,
	}
	_, err = cache.Ensure(t.Context(), tampered, "amd64")
	g.Expect(err).To(MatchError(ContainSubstring("not the " + sha("what the release published"))))
	g.Expect(err.Error()).To(ContainSubstring("the download was discarded"))
	entries, err := os.ReadDir(filepath.Join(cache.Dir, "sha512"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		g.Expect(strings.HasPrefix(e.Name(), ".download")).To(BeFalse(), "no partial download is left")
		g.Expect(e.Name()).NotTo(Equal(sha("what the release published")))
	}
}

// The Image Factory's kernel and initramfs URLs follow its layout, per architecture.
func TestAssetCacheImageFactory(t *testing.T) {
	g := NewWithT(t)
	var paths []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		_, _ = w.Write([]byte("asset"))
	}))
	t.Cleanup(server.Close)
	schematic := strings.Repeat("ab", 32)
	names, err := (&AssetCache{Dir: t.TempDir()}).Ensure(t.Context(), infrav1.BootAssets{
		ImageFactory: &infrav1.ImageFactory{URL: server.URL, Schematic: schematic, Version: "v1.13.3"},
	}, "arm64")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(paths).To(Equal([]string{
		"/image/" + schematic + "/v1.13.3/kernel-arm64", "/image/" + schematic + "/v1.13.3/initramfs-arm64.xz",
	}))
	g.Expect(names.Kernel).To(Equal("factory/" + schematic + "/v1.13.3/kernel-arm64"))
}

// TestAssetCacheVerifiesFactoryAssets: Image Factory assets are fetched from a factory (the
// local one of factorytest) for the schematic, and a download whose SHA-512 is not the one
// the spec pins is discarded; the right one is kept.
func TestAssetCacheVerifiesFactoryAssets(t *testing.T) {
	g := NewWithT(t)
	factory := factorytest.Start(t, "v1.14.1")
	id, err := (&imagefactory.Client{URL: factory.URL}).CreateSchematic(t.Context(), imagefactory.Schematic{})
	g.Expect(err).NotTo(HaveOccurred())
	sum := func(b []byte) string { return sha(string(b)) }
	kernel, initramfs := factorytest.Asset(id, "v1.14.1", "kernel-amd64"), factorytest.Asset(id, "v1.14.1", "initramfs-amd64.xz")
	cache := &AssetCache{Dir: t.TempDir()}

	wrong := infrav1.ImageFactory{URL: factory.URL, Schematic: id, Version: "v1.14.1", KernelSHA512: sum([]byte("another kernel")), InitramfsSHA512: sum(initramfs)}
	_, err = cache.Ensure(t.Context(), infrav1.BootAssets{ImageFactory: &wrong}, "amd64")
	g.Expect(err).To(MatchError(ContainSubstring("the download was discarded")))
	g.Expect(err.Error()).To(ContainSubstring("/image/" + id + "/v1.14.1/kernel-amd64"))
	entries, err := os.ReadDir(filepath.Join(cache.Dir, "sha512"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		g.Expect(e.Name()).NotTo(HavePrefix(".download"), "nothing half-written is left")
	}
	g.Expect(filepath.Join(cache.Dir, "sha512", wrong.KernelSHA512)).NotTo(BeAnExistingFile())

	right := wrong
	right.KernelSHA512 = sum(kernel)
	names, err := cache.Ensure(t.Context(), infrav1.BootAssets{ImageFactory: &right}, "amd64")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.ReadFile(filepath.Join(cache.Dir, names.Kernel))).To(Equal(kernel))
	g.Expect(os.ReadFile(filepath.Join(cache.Dir, names.Initramfs))).To(Equal(initramfs))

	_, err = cache.Ensure(t.Context(), infrav1.BootAssets{ImageFactory: &infrav1.ImageFactory{URL: factory.URL}}, "amd64")
	g.Expect(err).To(MatchError(ContainSubstring("names no schematic and version")))
}
