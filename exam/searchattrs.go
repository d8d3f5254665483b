package exam

import enumspb "go.temporal.io/api/enums/v1"

// Search attribute names kept current by ExamWorkflow so the Web UI and
// `temporal workflow list --query` can filter exams. AttrState and
// AttrStage hold what the workflow itself knows, and are named so: the
// state it last moved to (QUEUED once it scheduled a stage, whether that
// stage waits, is claimed or runs; RETRY_WAIT; COMPLETED; DEAD) and the
// stage at which it entered it. Only the api's status, from the pending
// activity, tells CLAIMED and EXECUTING apart.
const (
	AttrState    = "ExamWorkflowState"
	AttrStage    = "ExamWorkflowStage"
	AttrPriority = "ExamPriority"
	AttrDeviceID = "DeviceId"
	AttrCampus   = "Campus"
)

// SearchAttributeTypes lists octflow's custom search attributes and their
// types, for registration on a Temporal namespace.
func SearchAttributeTypes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		AttrState:    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		AttrStage:    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		AttrPriority: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		AttrDeviceID: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		AttrCampus:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}
