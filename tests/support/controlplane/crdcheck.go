// crdcheck validates CRD files with the Kubernetes API server's own CRD validation
// (k8s.io/apiextensions-apiserver: structural schema, defaults checked against their CEL rules as written,
// every rule compiled in Kubernetes' CEL environment and its cost estimated against the per-rule and
// per-CRD limits), as `kubectl apply` of the CRD would be judged. COSTS=1 also prints each rule's
// estimated cost. Run from the repository root: `make crds-check` (`controlplane crdcheck FILE...`).
// The real API server of the tests judges the CRDs the same way when they are applied; what only this
// gives is the cost of each rule.
package main

import (
	"context"
	"fmt"
	"os"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	v1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func crdCheck(files []string) int {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := apiextensions.AddToScheme(scheme); err != nil {
		panic(err)
	}
	bad := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			panic(err)
		}
		var crd v1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			fmt.Printf("%s: %v\n", f, err)
			bad++
			continue
		}
		scheme.Default(&crd)
		var internal apiextensions.CustomResourceDefinition
		if err := scheme.Convert(&crd, &internal, nil); err != nil {
			panic(err)
		}
		errs := validation.ValidateCustomResourceDefinition(context.TODO(), &internal)
		for _, e := range errs {
			fmt.Printf("%s: %v\n", f, e)
		}
		if len(errs) == 0 {
			fmt.Printf("%s: valid\n", f)
		}
		if os.Getenv("COSTS") != "" {
			for _, v := range internal.Spec.Versions {
				if v.Schema != nil {
					printCosts(v.Schema.OpenAPIV3Schema)
				}
			}
			if internal.Spec.Validation != nil {
				printCosts(internal.Spec.Validation.OpenAPIV3Schema)
			}
		}
		bad += len(errs)
	}
	if bad > 0 {
		return 1
	}
	return 0
}
