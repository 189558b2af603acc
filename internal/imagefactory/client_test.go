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

package imagefactory_test

import (
	"errors"
	"net"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/talon-capi/talon/internal/imagefactory"
	"github.com/talon-capi/talon/internal/imagefactory/factorytest"
)

func TestResolveAgainstALocalFactory(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	factory := factorytest.Start(t, "v1.14.1")
	c := &imagefactory.Client{URL: factory.URL}
	schematic := imagefactory.Schematic{Customization: imagefactory.Customization{
		ExtraKernelArgs:  []string{"console=ttyS0"},
		SystemExtensions: &imagefactory.SystemExtensions{OfficialExtensions: []string{"siderolabs/iscsi-tools"}},
	}}

	resolved, err := c.Resolve(ctx, schematic, "v1.14.1", false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resolved.SchematicID).To(MatchRegexp(`^[0-9a-f]{64}$`))
	g.Expect(resolved.Installer).To(Equal(factory.URL[len("http://"):] + "/metal-installer/" + resolved.SchematicID + ":v1.14.1"))
	g.Expect(string(factory.Schematic(resolved.SchematicID))).To(ContainSubstring("siderolabs/iscsi-tools"))

	t.Log("The same schematic is the same ID, from another client too")
	again, err := (&imagefactory.Client{URL: factory.URL}).Resolve(ctx, schematic, "v1.14.1", true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.SchematicID).To(Equal(resolved.SchematicID))
	g.Expect(again.Installer).To(ContainSubstring("/metal-installer-secureboot/"))
	g.Expect(factory.SchematicsCreated()).To(Equal(1))

	t.Log("An unknown extension is refused before anything is created")
	schematic.Customization.SystemExtensions.OfficialExtensions = []string{"siderolabs/iscsi-tools", "siderolabs/nosuch"}
	_, err = c.Resolve(ctx, schematic, "v1.14.1", false)
	var unknown *imagefactory.UnknownExtensionsError
	g.Expect(errors.As(err, &unknown)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("system extension siderolabs/nosuch is not an official extension of Talos v1.14.1"))
	g.Expect(factory.SchematicsCreated()).To(Equal(1))

	t.Log("A Talos version the factory does not build is refused")
	_, err = c.Resolve(ctx, schematic, "v1.14.99", false)
	var rejected *imagefactory.RejectedError
	g.Expect(errors.As(err, &rejected)).To(BeTrue(), "got %v", err)
	g.Expect(imagefactory.IsUnavailable(err)).To(BeFalse())
}

func TestUnreachableFactory(t *testing.T) {
	g := NewWithT(t)
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	address := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())
	c := &imagefactory.Client{URL: "http://" + address}
	_, err = c.Resolve(t.Context(), imagefactory.Schematic{}, "v1.14.1", false)
	g.Expect(imagefactory.IsUnavailable(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("Image Factory http://" + address + " is unavailable"))
}
