package exam

import enumspb "go.temporal.io/api/enums/v1"

// Search attribute names kept current by ExamWorkflow so the Web UI and
// `temporal workflow list --query` can filter exams.
const (
	AttrState    = "ExamState"
	AttrStage    = "ExamStage"
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
