package main

import (
	"fmt"
	"sort"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// printCosts prints every rule's estimated cost (per evaluation x how often it can run) and the total.
func printCosts(root *apiextensions.JSONSchemaProps) {
	s, err := structuralschema.NewStructural(root)
	if err != nil {
		fmt.Println("  cost: not structural:", err)
		return
	}
	var total uint64
	var rows []string
	walk(s, "", 1, true, func(path string, node *structuralschema.Structural, card uint64, isRoot bool) {
		if len(node.XValidations) == 0 {
			return
		}
		results, err := cel.Compile(node, model.SchemaDeclType(node, isRoot), celconfig.PerCallLimit,
			environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()), cel.NewExpressionsEnvLoader())
		if err != nil {
			fmt.Println("  compile:", path, err)
			return
		}
		for i, r := range results {
			cost := r.MaxCost * card
			total += cost
			rows = append(rows, fmt.Sprintf("%12d = %9d x %5d  %s[%d]", cost, r.MaxCost, card, path, i))
		}
	})
	sort.Strings(rows)
	for _, r := range rows {
		fmt.Println("  " + r)
	}
	fmt.Printf("  total %d (limit per rule %d, per CRD %d)\n", total, uint64(10000000), uint64(100000000))
}

func walk(s *structuralschema.Structural, path string, card uint64, isRoot bool,
	visit func(string, *structuralschema.Structural, uint64, bool)) {
	visit(path, s, card, isRoot)
	for name, p := range s.Properties {
		p := p
		walk(&p, path+"."+name, card, false, visit)
	}
	if s.Items != nil {
		n := uint64(1 << 40)
		if s.ValueValidation != nil && s.ValueValidation.MaxItems != nil {
			n = uint64(*s.ValueValidation.MaxItems)
		}
		walk(s.Items, path+"[*]", card*n, false, visit)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		n := uint64(1 << 40)
		if s.ValueValidation != nil && s.ValueValidation.MaxProperties != nil {
			n = uint64(*s.ValueValidation.MaxProperties)
		}
		walk(s.AdditionalProperties.Structural, path+"{*}", card*n, false, visit)
	}
}
