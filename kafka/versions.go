package kafka

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// window is the versions of one API this listener serves.
type window struct{ min, max int16 }

// versions: every API served, in windows as wide as the clients we test
// with need (franz-go, librdkafka, the Java client). The ceilings stop
// below versions that name topics by id (Fetch 13, Produce 13 on) or need
// KIP-848's group protocol (OffsetCommit 9); clients negotiate down.
var versions = map[int16]window{
	kmsg.Produce.Int16():            {3, 10},
	kmsg.Fetch.Int16():              {4, 12},
	kmsg.ListOffsets.Int16():        {1, 7},
	kmsg.Metadata.Int16():           {0, 12},
	kmsg.OffsetCommit.Int16():       {2, 8},
	kmsg.OffsetFetch.Int16():        {1, 8},
	kmsg.FindCoordinator.Int16():    {0, 4},
	kmsg.JoinGroup.Int16():          {0, 9},
	kmsg.Heartbeat.Int16():          {0, 4},
	kmsg.LeaveGroup.Int16():         {0, 5},
	kmsg.SyncGroup.Int16():          {0, 5},
	kmsg.DescribeGroups.Int16():     {0, 5},
	kmsg.ListGroups.Int16():         {0, 4},
	kmsg.SASLHandshake.Int16():      {1, 1}, // v0 sends the SASL bytes unframed: not served
	kmsg.ApiVersions.Int16():        {0, 3},
	kmsg.CreateTopics.Int16():       {0, 7},
	kmsg.DeleteTopics.Int16():       {0, 6},
	kmsg.InitProducerID.Int16():     {0, 4},
	kmsg.AddPartitionsToTxn.Int16(): {0, 3},
	kmsg.AddOffsetsToTxn.Int16():    {0, 3},
	kmsg.EndTxn.Int16():             {0, 3},
	kmsg.TxnOffsetCommit.Int16():    {0, 3},
	kmsg.DescribeConfigs.Int16():    {0, 4},
	kmsg.SASLAuthenticate.Int16():   {0, 2},
	kmsg.DeleteGroups.Int16():       {0, 2},
}

func apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	keys := make([]int, 0, len(versions))
	for k := range versions {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	for _, k := range keys {
		w := versions[int16(k)]
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: int16(k), MinVersion: w.min, MaxVersion: w.max})
	}
	return resp
}
