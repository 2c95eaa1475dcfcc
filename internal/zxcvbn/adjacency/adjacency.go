package adjacency

import "sync"

type Graph struct {
	Graph         map[string][]string
	Name          string
	AverageDegree float64
}

// Graphs returns the adjacency graphs by name, built on first use.
var Graphs = sync.OnceValue(func() map[string]*Graph {
	graphs := make(map[string]*Graph)
	initGraph(graphs, "qwerty", adjacencyGraphQwerty())
	initGraph(graphs, "dvorak", adjacencyGraphDvorak())
	initGraph(graphs, "keypad", adjacencyGraphKeypad())
	initGraph(graphs, "mac_keypad", adjacencyGraphMacKeypad())
	return graphs
})

func initGraph(graphs map[string]*Graph, name string, data map[string][]string) {
	g := &Graph{
		Name:          name,
		Graph:         data,
		AverageDegree: calculateAvgDegree(data),
	}
	graphs[name] = g
}

func calculateAvgDegree(g map[string][]string) float64 {
	var avg float64
	for _, value := range g {
		for _, chars := range value {
			if chars != "" {
				avg += float64(1)
			}
		}

	}

	return avg / float64(len(g))
}
